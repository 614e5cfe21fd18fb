"""Running grids on clusters: the Hydra launchers that submit a sweep and return, the record of what was launched,
status, the resume cron and archiving. The schedulers themselves (Slurm, PBS) are orchestrator.schedulers.

Layout (one purpose per file):
    launcher.py     Hydra launchers: cluster=slurm|pbs|gadi submit one job per cell and return
                    (Hydra finds them as plugin_root/hydra_plugins/amdnn_cluster, which only names them)
    grid.py         the record of launched cells (state dir), shared by status, resume and archive
    status.py       `python -m orchestrator.cluster.status`: the grid as a table, with why a cell waits or failed
    resume.py       `python -m orchestrator.cluster.resume [--dry-run]`: resubmit dead cells (the cron job)
    archive.py      copy finished (and, periodically, running) cells to the archive path
    grid_report.py  the report of a grid once its last cell has finished (written by the resume cron)
    preempt.py      inside a job: walltime/preemption -> checkpoint -> requeue or continuation
    job.py          `python -m orchestrator.cluster.job`: the same, for the hand-written jobs/ scripts
    pbs.py          `python -m orchestrator.cluster.pbs`: a PBS job's entry point under its older name
"""

from orchestrator.environment import add_hydra_plugins

# Every entry point here (status, resume, archive, job) may unpickle a launcher saved by submitit, whose class Hydra
# knows by its hydra_plugins name: make that name importable first.
add_hydra_plugins()
