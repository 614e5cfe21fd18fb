"""PBSExecutor: submitit's four hooks for PBS (write the script, the qsub command, read the job id, count tasks),
plus PBSJob (qdel) and the qstat state watcher. One job per cell: Gadi does not offer job arrays, and a cell's
continuation after a walltime cut must be a job of its own.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import typing as tp
from pathlib import Path

from submitit.core import core, logger, utils

from orchestrator.schedulers import scripts
from orchestrator.schedulers.resources import RESOURCE_NAMES, SUBMITIT_GENERIC
from orchestrator.schedulers.pbs import qstat
# qstat_flavour and query_states are used from here by schedulers/job_status.py and the tests.
from orchestrator.schedulers.pbs.query import (parse_qstat, qstat_command, qstat_flavour,  # noqa: F401
                                              query_info, query_states)
from orchestrator.schedulers.pbs.script import make_pbs_script, valid_parameters


class PBSInfoWatcher(core.InfoWatcher):
    """Job states from qstat, for every registered unfinished job in one call (plus the re-asks of query.py)."""

    def _make_command(self) -> tp.Optional[tp.List[str]]:
        to_check = self._registered - self._finished
        return qstat_command(sorted(to_check)) if to_check else None

    def update(self) -> None:
        to_check = sorted(self._registered - self._finished)
        if not to_check:
            return
        self._num_calls += 1
        try:
            self._info_dict.update(self._indexed(query_info(to_check)))
        except (OSError, subprocess.SubprocessError) as e:
            logger.get_logger().warning(f"Could not run qstat ({e}); job states may be stale.")
        self._last_status_check = time.time()
        for job_id in self._registered - self._finished:
            if self.is_done(job_id, mode="cache"):
                self._finished.add(job_id)

    def read_info(self, string: tp.Union[bytes, str]) -> tp.Dict[str, tp.Dict[str, str]]:
        """One qstat answer, indexed by every form of the ids (submitit's hook; `update` asks through query.py)."""
        return self._indexed(parse_qstat(string))

    def _indexed(self, info: tp.Dict[str, tp.Dict[str, tp.Any]]) -> tp.Dict[str, tp.Dict[str, tp.Any]]:
        # qsub may print '123.server' while qstat prints '123' (or the reverse): index by both.
        out = dict(info)
        out.update({qstat.short_id(k): v for k, v in info.items()})
        registered = {qstat.short_id(j): j for j in self._registered}
        out.update({registered[s]: v for s, v in ((qstat.short_id(k), v) for k, v in info.items()) if s in registered})
        return out

    def get_state(self, job_id: str, mode: str = "standard") -> str:
        return self.get_info(job_id, mode=mode).get("State") or "UNKNOWN"


class PBSJob(core.Job[core.R]):
    _cancel_command = "qdel"
    watcher = PBSInfoWatcher(delay_s=60)


class PBSExecutor(core.PicklingExecutor):
    """Submits pickled functions as PBS jobs with qsub; parameters are those of `make_pbs_script`.

    folder: shared folder for scripts, pickles and logs (may hold %j). max_num_timeout: how many continuations a
    job may submit at its walltime. python: the interpreter command on the compute node (default: this one).
    """

    job_class = PBSJob

    def __init__(self, folder: tp.Union[str, Path], max_num_timeout: int = 3, max_pickle_size_gb: float = 1.0,
                 python: tp.Optional[str] = None) -> None:
        super().__init__(folder, max_num_timeout=max_num_timeout, max_pickle_size_gb=max_pickle_size_gb)
        self.python = shlex.quote(sys.executable) if python is None else python
        # Slurm's qsub wrapper pastes the script path into a shell command unquoted: refuse paths that need quoting.
        scripts.bare_path("folder", self.folder)
        if not self.affinity() > 0:
            raise RuntimeError('Could not find "qsub": is this a PBS login node, and is PBS in your PATH?')

    @classmethod
    def _equivalence_dict(cls) -> core.EquivalenceDict:
        names = {k: RESOURCE_NAMES[g]["pbs"][0] for k, g in SUBMITIT_GENERIC.items()}
        return tp.cast(core.EquivalenceDict, {"name": "job_name", "nodes": "nodes", "tasks_per_node": "tasks_per_node",
                                              **names})

    @classmethod
    def _valid_parameters(cls) -> tp.Set[str]:
        return set(valid_parameters())

    def _convert_parameters(self, params: tp.Dict[str, tp.Any]) -> tp.Dict[str, tp.Any]:
        out = {}
        for key, value in params.items():
            generic = SUBMITIT_GENERIC.get(key)
            if generic is None:
                out[key] = value
                continue
            name, convert = RESOURCE_NAMES[generic]["pbs"]
            out[name] = convert(value)
        for key in ("nodes", "tasks_per_node"):
            if out.pop(key, 1) != 1:
                raise ValueError(f"{key}: the PBS executor runs one task on one node per job")
        return out

    def _internal_update_parameters(self, **kwargs: tp.Any) -> None:
        defaults = valid_parameters()
        invalid = sorted(set(kwargs) - set(defaults))
        if invalid:
            listing = "\n  - ".join(f"{k} (default: {v!r})" for k, v in sorted(defaults.items()))
            raise ValueError(f"Unavailable PBS parameter(s): {invalid}\nValid parameters are:\n  - {listing}")
        make_pbs_script(command="true", folder=self.folder, **{**self.parameters, **kwargs})  # fails early
        super()._internal_update_parameters(**kwargs)

    @property
    def _submitit_command_str(self) -> str:
        return " ".join([self.python, "-u -m orchestrator.schedulers.pbs", shlex.quote(str(self.folder))])

    def _make_submission_file_text(self, command: str, uid: str) -> str:
        return make_pbs_script(command=command, folder=self.folder, **self.parameters)

    def _num_tasks(self) -> int:
        return 1

    def _make_submission_command(self, submission_file_path: Path) -> tp.List[str]:
        return submission_command(submission_file_path)

    @staticmethod
    def _get_job_id_from_submission_command(string: tp.Union[bytes, str]) -> str:
        return job_id_from_qsub(string)

    @classmethod
    def affinity(cls) -> int:
        # Below Slurm's 2: where both exist (Slurm with Torque wrappers) AutoExecutor keeps choosing Slurm.
        return -1 if shutil.which("qsub") is None else 1


def submission_command(script: tp.Union[str, Path]) -> tp.List[str]:
    """qsub run from the script's folder (`env -C`), so PBS's own .o/.e files land there and not in the user's cwd."""
    script = Path(script)
    return ["env", "-C", str(script.parent), "qsub", scripts.bare_path("submission script", script)]


def job_id_from_qsub(string: tp.Union[bytes, str]) -> str:
    """qsub prints the job id ('12345678.gadi-pbs'; Slurm's wrapper prints '123') as its last line."""
    if isinstance(string, bytes):
        string = string.decode()
    lines = [line.strip() for line in string.strip().splitlines() if line.strip()]
    candidate = lines[-1].split()[-1] if lines else ""
    if not re.match(r"^[0-9]+(\[[0-9]*\])?(\.[A-Za-z0-9_.-]+)?$", candidate):
        raise utils.FailedSubmissionError(f'Could not read a job id from qsub\'s output "{string}"')
    return candidate
