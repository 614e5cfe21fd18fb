"""What the scheduler says about jobs: one function, `job_states`, for every scheduler, in Slurm's state names
(PBS states are translated by pbs/qstat.py), and which of those mean the job is still queued or running.
"""
from __future__ import annotations

import subprocess
import typing as tp

from orchestrator.schedulers import scripts
from orchestrator.schedulers.pbs.executor import query_states
from orchestrator.schedulers.pbs.query import query_info
from orchestrator.schedulers.resources import check_scheduler

QUEUED = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING", "SUSPENDED", "RESIZING"})
RUNNING = frozenset({"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"})


def _slurm_states(job_ids: tp.List[str]) -> tp.Dict[str, str]:
    """sacct for every job (accounting keeps finished ones), then squeue for the live ones: the controller knows a job
    the moment it is submitted, while accounting may lag a little behind."""
    from submitit.slurm.slurm import SlurmInfoWatcher  # pylint: disable=import-outside-toplevel

    mains = sorted({j.split("_")[0] for j in job_ids})
    command = ["sacct", "-o", "JobID,State,NodeList", "--parsable2"]
    for main in mains:
        command += ["-j", main]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"sacct failed ({out.stderr.strip()}): cannot tell which jobs are alive")
    info = SlurmInfoWatcher().read_info(out.stdout)
    # sacct prints one line per job and per requeue; read_info keeps the last, which is the current one.
    states = {j: info[j]["State"].split()[0] for j in job_ids if j in info}
    # squeue exits non-zero when it has forgotten one of the ids, but still lists the others.
    live = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(mains)], capture_output=True,
                          text=True, timeout=120)
    for line in live.stdout.splitlines():
        job, _, state = line.strip().partition("|")
        if job in job_ids or job.split("_")[0] in job_ids:
            states[job] = state
    return states


def job_states(scheduler: str, job_ids: tp.Iterable[str]) -> tp.Dict[str, str]:
    """{job id: state} for the jobs the scheduler knows (forgotten jobs are absent: they are not alive)."""
    ids = sorted({scripts.job_id(j) for j in job_ids})
    if not ids:
        return {}
    if check_scheduler(scheduler) == "slurm":
        return _slurm_states(ids)
    return query_states(ids)


def _slurm_reasons(job_ids: tp.List[str]) -> tp.Dict[str, str]:
    """squeue's reason for each live job (%r: PartitionConfig, Resources, Priority, QOSMaxJobsPerUserLimit, ...)."""
    mains = sorted({j.split("_")[0] for j in job_ids})
    live = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%r", "-j", ",".join(mains)], capture_output=True,
                          text=True, timeout=120)
    reasons = {}
    for line in live.stdout.splitlines():
        job, _, reason = line.strip().partition("|")
        if (job in job_ids or job.split("_")[0] in job_ids) and reason and reason != "None":
            reasons[job] = reason
    return reasons


def job_reasons(scheduler: str, job_ids: tp.Iterable[str],
                run: tp.Optional[tp.Callable[..., subprocess.CompletedProcess]] = None) -> tp.Dict[str, str]:
    """{job id: why it waits} as the scheduler words it (Slurm's reason code, PBS's comment), for the jobs that have
    one. Never raises: a status table without reasons is still a status table. `run`: a stand-in for subprocess.run
    when asking qstat (tests)."""
    ids = sorted({scripts.job_id(j) for j in job_ids})
    if not ids:
        return {}
    try:
        if check_scheduler(scheduler) == "slurm":
            return _slurm_reasons(ids)
        return {j: str(v["comment"]) for j, v in query_info(ids, run).items() if v.get("comment")}
    except Exception:  # noqa: BLE001 - the scheduler unreachable or its answer unreadable: no reasons, still a table
        return {}


def alive(state: tp.Optional[str]) -> bool:
    return state in QUEUED or state in RUNNING
