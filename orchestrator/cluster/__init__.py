"""Running grids on clusters: Slurm through submitit, PBS (Pro and Torque) as a submitit executor plugin, the Hydra
launchers that submit a sweep and return, the record of what was launched, status, the resume cron and archiving.

Layout (one purpose per file):
    resources.py  the schedulers and the generic resource names (walltime, cpus, gpus, mem) mapped to each one's
    scripts.py    validation and quoting of every config value that reaches a job script
    slurm.py      cluster config -> submitit Slurm parameters (warning signal, requeue bound)
    pbs/          the PBS executor plugin: script writer, qstat parsers, executor, job environment, config mapping
    launcher.py   Hydra launchers: cluster=slurm|pbs|gadi submit one job per cell and return
                  (Hydra finds them as plugin_root/hydra_plugins/amdnn_cluster, which only names them)
    submit.py     the executor a grid record describes; resubmission
    queue.py      job states from the scheduler (sacct/squeue, qstat), and why a job waits (reason, comment)
    limits.py     what a partition or queue can ever give one job; impossible requests refused before submitting
    preempt.py    inside a job: walltime/preemption -> checkpoint -> requeue or continuation
    job.py        `python -m orchestrator.cluster.job`: the same, for the hand-written jobs/ scripts
    grid.py       the record of launched cells (state dir), shared by status, resume and archive
    status.py     `python -m orchestrator.cluster.status`: the grid as a table, with why a cell waits or failed
    resume.py     `python -m orchestrator.cluster.resume [--dry-run]`: resubmit dead cells (the cron job)
    archive.py    copy finished (and, periodically, running) cells to the archive path
"""

from orchestrator.environment import add_hydra_plugins

# Every entry point here (status, resume, archive, job) may unpickle a launcher saved by submitit, whose class Hydra
# knows by its hydra_plugins name: make that name importable first.
add_hydra_plugins()
