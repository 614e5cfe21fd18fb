"""Building the submitit executor a cell's record describes, and submitting a call with it: shared by the launcher
(first submission), the resume cron (resubmission) and nothing else.

An executor spec is plain data kept in the grid record: {"scheduler", "folder", "max_num_timeout", "python",
"parameters"} where parameters are the executor's own (see slurm.slurm_parameters and pbs.params.pbs_parameters).
"""
from __future__ import annotations

import typing as tp

from orchestrator.schedulers.pbs.executor import PBSExecutor
from orchestrator.schedulers.resources import check_scheduler


def make_executor(spec: tp.Mapping[str, tp.Any]):
    scheduler = check_scheduler(spec["scheduler"])
    if scheduler == "slurm":
        from submitit import SlurmExecutor  # pylint: disable=import-outside-toplevel

        executor = SlurmExecutor(spec["folder"], max_num_timeout=int(spec["max_num_timeout"]), python=spec.get("python"))
    else:
        executor = PBSExecutor(spec["folder"], max_num_timeout=int(spec["max_num_timeout"]), python=spec.get("python"))
    executor.update_parameters(**spec["parameters"])
    return executor


def resubmit(spec: tp.Mapping[str, tp.Any], delayed: tp.Any) -> str:
    """Submit a saved call (DelayedSubmission) again as a new single job; its requeue budget starts afresh."""
    executor = make_executor(spec)
    job = executor.submit(delayed.function, *delayed.args, **delayed.kwargs)
    return job.job_id
