"""Inside a cluster job: the scheduler's warning (Slurm's USR1 before the walltime or on preemption; PBS's own
timer, see schedulers/pbs/job_environment.py) or a SIGTERM becomes a checkpoint request to the running cell; once
the cell has returned "preempted", the job requeues itself (Slurm: scontrol requeue, same job id) or submits its
continuation (PBS: a new job id), within the requeue budget that submitit keeps in the job's pickle
(cluster.max_requeues).

A SIGTERM alone (scancel, qdel, a node going down) checkpoints but does not requeue: the job was stopped on purpose
or is dying, and the resume cron decides what happens to the cell next.
"""
from __future__ import annotations

import signal
import typing as tp

from submitit.core import utils

from orchestrator.cell.run import request_checkpoint
from orchestrator.schedulers.pbs.job_environment import submit_continuation


class Warnings:
    """Signal handlers that turn the scheduler's signals into checkpoint requests and remember what came.

    Slurm sends its warning to every process of the job step, so the cell's training process (which takes USR1 as
    "checkpoint now") may stop before this process hears of it: any warning that came counts, however early
    (Slurm's own resolution is about a minute).
    """

    def __init__(self) -> None:
        self.warned = False    # walltime near, or preemption: continue the job elsewhere
        self.stopped = False   # SIGTERM: checkpoint, do not continue

    def install(self) -> "Warnings":
        for sig in (signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, self._warn)
        signal.signal(signal.SIGTERM, self._stop)
        return self

    def _warn(self, signum: int, frame: tp.Any) -> None:  # only flags: safe in a signal handler
        self.warned = True
        request_checkpoint()

    def _stop(self, signum: int, frame: tp.Any) -> None:
        self.stopped = True
        request_checkpoint()


class RequeueBudgetExhausted(utils.UncompletedJobError):
    """The job was warned once more than cluster.max_requeues allows."""


def continue_job(env: tp.Any, scheduler: str) -> str:
    """Spend one requeue from the job's pickle and requeue (Slurm) or continue (PBS); returns the job id that will
    run the cell next (the same one on Slurm)."""
    paths = env.paths
    delayed = utils.DelayedSubmission.load(paths.submitted_pickle)
    countdown = delayed._timeout_countdown - 1  # pylint: disable=protected-access
    if countdown < 0:
        raise RequeueBudgetExhausted(
            f"job {env.job_id} reached its walltime again after all its requeues (cluster.max_requeues); its cell "
            "stays resumable: the resume cron resubmits it (cluster.max_attempts), or raise cluster.max_requeues")
    delayed.set_timeout(delayed._timeout_min, countdown)  # pylint: disable=protected-access
    with utils.temporary_save_path(paths.submitted_pickle) as tmp:
        delayed.dump(tmp)
    if scheduler == "pbs":
        return submit_continuation(env.job_id)
    env._requeue(countdown)  # pylint: disable=protected-access
    return env.job_id
