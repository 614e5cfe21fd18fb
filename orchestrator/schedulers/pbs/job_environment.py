"""PBSJobEnvironment: what a submitit job knows about itself under PBS, and how it continues past its walltime.

PBS has no warning signal before the walltime (it sends SIGTERM at the limit and SIGKILL after the server's kill
delay) and re-running a job (qrerun) needs an operator. So the job arms a timer from the walltime its script exports
(AMDNN_WALLTIME_S): AMDNN_WARN_BEFORE_S seconds before the limit the timer raises submitit's preemption signal in the
job itself, the job checkpoints, and `_requeue` submits a continuation: the same script again, with the checkpointed
pickle moved to the new job's id.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import typing as tp
from pathlib import Path

from submitit.core import job_environment, logger, utils

from orchestrator.schedulers.pbs.executor import job_id_from_qsub, submission_command


class PBSJobEnvironment(job_environment.JobEnvironment):
    # One task on one node per job: ranks and counts are constants, only the id comes from the environment.
    _env = {"job_id": "PBS_JOBID"}

    @property
    def raw_job_id(self) -> str:
        # Slurm's Torque wrappers run PBS scripts as Slurm jobs, which have SLURM_JOB_ID and no PBS_JOBID.
        return os.environ.get("PBS_JOBID") or os.environ["SLURM_JOB_ID"]

    @property
    def num_tasks(self) -> int:
        return 1

    @property
    def num_nodes(self) -> int:
        return 1

    @property
    def node(self) -> int:
        return 0

    @property
    def global_rank(self) -> int:
        return 0

    @property
    def local_rank(self) -> int:
        return 0

    @property
    def hostnames(self) -> tp.List[str]:
        nodefile = os.environ.get("PBS_NODEFILE")
        if nodefile and Path(nodefile).exists():
            return sorted(set(Path(nodefile).read_text().split())) or [self.hostname]
        return [self.hostname]

    def _handle_signals(self, paths: utils.JobPaths, submission: utils.DelayedSubmission) -> None:
        super()._handle_signals(paths, submission)
        arm_walltime_timer()

    def _requeue(self, countdown: int) -> None:
        new_id = submit_continuation(self.job_id)
        logger.get_logger().info(f"Submitted continuation {new_id} of job {self.job_id} ({countdown} remaining)")


def walltime_deadline_s() -> tp.Optional[float]:
    """Seconds after the job's start at which to checkpoint, from the variables the PBS script exports."""
    walltime = os.environ.get("AMDNN_WALLTIME_S")
    if not walltime:
        return None
    warning = os.environ.get("AMDNN_WARN_BEFORE_S")
    if not warning:  # the script writer exports both (pbs/script.py); the value is decided there, not here
        raise RuntimeError("AMDNN_WALLTIME_S is set but AMDNN_WARN_BEFORE_S is not: a PBS job script of this project "
                           "exports both (orchestrator/schedulers/pbs/script.py); export AMDNN_WARN_BEFORE_S=<seconds>")
    return max(1.0, float(walltime) - float(warning))


_timer: tp.Optional[threading.Timer] = None


def arm_walltime_timer() -> None:
    """Start (once per process) the timer that signals this process before its walltime."""
    global _timer  # pylint: disable=global-statement
    deadline = walltime_deadline_s()
    if deadline is None or _timer is not None:
        return
    sig = job_environment.JobEnvironment._usr_sig()

    def fire() -> None:
        logger.get_logger().warning(f"Walltime minus {os.environ.get('AMDNN_WARN_BEFORE_S')} s reached: "
                                    f"sending {signal.Signals(sig).name} to checkpoint and continue")
        os.kill(os.getpid(), sig)

    _timer = threading.Timer(deadline, fire)
    _timer.daemon = True
    _timer.start()


def submit_continuation(job_id: str, folder: tp.Optional[str] = None) -> str:
    """qsub the job's own script again and hand its (checkpointed) pickle to the new job; returns the new job id."""
    folder = folder or os.environ["SUBMITIT_FOLDER"]
    old = utils.JobPaths(folder, job_id=job_id)
    script = old.submission_file.resolve()
    # A copy under a fresh name in the job-independent folder, as the executor does for a first submission.
    staged = utils.JobPaths.get_first_id_independent_folder(folder) / f".submission_file_cont_{job_id}.sh"
    shutil.copyfile(script, staged)
    out = subprocess.run(submission_command(staged), capture_output=True, text=True, timeout=300, check=False)
    if out.returncode != 0:
        raise utils.FailedSubmissionError(f"qsub of the continuation of job {job_id} failed: {out.stderr.strip()}")
    new_id = job_id_from_qsub(out.stdout)
    new = utils.JobPaths(folder, job_id=new_id)
    new.folder.mkdir(parents=True, exist_ok=True)
    # The new job waits up to 60 s for its pickle (submitit's process_job), so copying after qsub is safe.
    with utils.temporary_save_path(new.submitted_pickle) as tmp:
        shutil.copyfile(old.submitted_pickle, tmp)
    new.move_temporary_file(staged, "submission_file", keep_as_symlink=True)
    return new_id
