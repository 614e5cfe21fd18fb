"""The schedulers a grid is submitted to: Slurm through submitit, PBS (Pro and Torque) as a submitit executor plugin.

    resources  the schedulers, and the generic resource names (walltime, cpus, gpus, mem) mapped to each one's
    scripts    validation and quoting of every config value that reaches a job script
    slurm      cluster config -> submitit Slurm parameters (warning signal, requeue bound)
    pbs/       the PBS executor plugin: script writer, qstat parsers, executor, job environment, config mapping
               (`python -m orchestrator.schedulers.pbs` is a PBS job's entry point)
    params     cluster config -> the executor's parameters, for either scheduler: what config.validate checks
               and the cluster launcher submits with
    limits     what a partition or queue can ever give one job; impossible requests refused before submitting
    job_status job states from the scheduler (sacct/squeue, qstat), and why a job waits (reason, comment)
    submit     the executor a grid record describes; resubmission

Nothing here knows about cells or configs beyond the `cluster` part of one: the grid layer (orchestrator.cluster)
builds on it.
"""
