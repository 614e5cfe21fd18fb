"""PBS (PBS Pro, as on NCI Gadi, and Torque) as a submitit executor plugin, registered through submitit's
entry-point mechanism (pyproject.toml, group "submitit"): `submitit.AutoExecutor(folder, cluster="pbs")` works once
the project is installed.

    script.py       make_pbs_script: a pure function from parameters to the job script; its signature is the list
                    of valid parameters
    qstat.py        parsers for `qstat -x -f -F json` (PBS Pro) and `qstat -f` text (Torque, PBS Pro's text form,
                    Slurm's wrappers), in submitit's state names
    pbspro_json.py  reading PBS Pro's JSON where its writer breaks it (unquoted numbers, bad escapes), job by job
    query.py        asking qstat: every id answered (re-asked singly if a build drops some), unreadable JSON asked
                    again as text
    executor.py     PBSExecutor (qsub), PBSJob (qdel) and the state watcher (qstat)
    job_environment.py  PBSJobEnvironment: inside the job, a walltime timer and continuation jobs
    __main__.py     the job's entry point: submitit's, with the plugin registered even when not pip-installed
"""
