"""The Hydra launcher of cluster=local: the cells of a sweep side by side on this machine's GPUs, or one after another.

With GPUs (gpu_pool: cluster.gpu_ids, CUDA_VISIBLE_DEVICES or nvidia-smi) and cluster.gpus null (1 per cell) or above
0, each cell runs in a process of its own (sweep/cell_process) with CUDA_VISIBLE_DEVICES set to its GPUs, and
floor(GPUs / cluster.gpus) cells run at once (sweep/parallel), each cell's output in `<sweep dir>/<job>/cell.log`.
Without a GPU, or with cluster.gpus=0, the cells run one after another in this process, as Hydra's basic launcher
runs them. Either way a finished cell is not trained again, a failed one stops nothing else, and Ctrl-C stops every
running cell at a checkpoint, so a re-run of the same command finishes what did not finish.
"""
from __future__ import annotations

import logging
import os
import sys
import typing as tp
from pathlib import Path

from hydra._internal.core_plugins.basic_launcher import BasicLauncher
from hydra.core.utils import JobReturn, JobStatus, setup_globals
from omegaconf import OmegaConf, open_dict

from orchestrator.cell.progress import POSITION_VARIABLE
from orchestrator.common import cellfiles, paths
from orchestrator.sweep import cell_process
from orchestrator.sweep.gpu_pool import FAKE_IDS_VARIABLE, GpuPool, GpuRequestError, gpus_per_cell, machine_gpus
from orchestrator.sweep.parallel import Job, Outcome, run_jobs

log = logging.getLogger(__name__)

JOB_FILE = ".cell-job.pkl"        # in each job's output folder: what cell_process runs
JOB_RESULT = ".cell-job.json"     # ... and what happened (cell_process writes it)
CELL_LOG = "cell.log"             # ... and the cell process's output


class LocalLauncher(BasicLauncher):
    """cluster=local (conf/hydra/launcher/amdnn_local.yaml); see the module docstring."""

    def launch(self, job_overrides: tp.Sequence[tp.Sequence[str]], initial_job_idx: int) -> tp.Sequence[JobReturn]:
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        cluster = tp.cast(dict, OmegaConf.to_container(self.config.cluster, resolve=True))
        try:
            ids, source = machine_gpus(cluster)
            per_cell = gpus_per_cell(cluster, ids, source)
        except GpuRequestError as e:
            print(f"[amdnn] sweep refused, nothing trained: {e}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        if per_cell == 0:
            return super().launch(job_overrides, initial_job_idx)
        return self._launch_parallel(job_overrides, initial_job_idx, ids, per_cell, source)

    def _launch_parallel(self, job_overrides: tp.Sequence[tp.Sequence[str]], initial_job_idx: int,
                         ids: tuple[str, ...], per_cell: int, source: str) -> tp.List[JobReturn]:
        from hydra.core.singleton import Singleton  # Hydra's internals only when a sweep runs side by side

        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        sweep_dir = Path(str(self.config.hydra.sweep.dir)).absolute()
        sweep_dir.mkdir(parents=True, exist_ok=True)
        pool = GpuPool(ids, per_cell)
        fake = source.startswith(FAKE_IDS_VARIABLE)
        print(f"[amdnn] {len(job_overrides)} cell(s) on GPUs {','.join(ids)} ({source}), {per_cell} per cell: "
              f"{pool.at_once} at once" + ("; fake ids: the cells train on the CPU" if fake else ""), flush=True)
        state = Singleton.get_state()
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(paths.repo_root()), os.environ.get("PYTHONPATH")]))}
        jobs, overrides_of = [], {}
        for n, overrides in enumerate(job_overrides):
            idx = initial_job_idx + n
            config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(config):
                config.hydra.job.id = idx
                config.hydra.job.num = idx
            subdir = str(config.hydra.sweep.subdir)
            folder = sweep_dir / subdir
            cell_process.write_job(
                folder / JOB_FILE, config=self.config, config_loader=self.hydra_context.config_loader,
                singleton_state=state, task_function=self.task_function, overrides=list(overrides), idx=idx,
                sweep_dir=str(sweep_dir), subdir=subdir,
                gpus=0 if fake else per_cell,  # fake ids: nothing to train on but the CPU, and the cell must know it
                result=str(folder / JOB_RESULT))
            (folder / JOB_RESULT).unlink(missing_ok=True)
            label = (f"{config.model.name} x {config.mult.name} ({config.dataset.name}, seed {config.seed})")
            jobs.append(Job(idx, label, [sys.executable, "-m", "orchestrator.sweep.cell_process",
                                         str(folder / JOB_FILE)], folder / CELL_LOG,
                            {**env, POSITION_VARIABLE: f"{n + 1}/{len(job_overrides)}"}))
            overrides_of[idx] = list(overrides)
        outcomes = run_jobs(jobs, pool, describe=_describe, describe_stop=_describe_stop)
        return [JobReturn(overrides=overrides_of[o.job.index], status=JobStatus.COMPLETED, task_name=o.job.label,
                          _return_value=_result(o)) for o in outcomes]


def _result(outcome: Outcome) -> dict:
    """launch_cell's dict for the cell, or a failed one saying why there is none (the process died first)."""
    recorded = cellfiles.read_json(outcome.job.log.parent / JOB_RESULT) or {}
    value = recorded.get("return_value")
    if recorded.get("status") == "completed" and isinstance(value, dict):
        return {**value, "gpus": list(outcome.gpus), "cuda_visible_devices": recorded.get("cuda_visible_devices")}
    error = recorded.get("error") or f"the cell's process ended with exit status {outcome.returncode} and no result"
    return {"identity": "", "name": outcome.job.label, "cell_dir": "", "status": "failed", "error": error,
            "skipped": False, "test_accuracy": None, "gpus": list(outcome.gpus)}


def _describe(outcome: Outcome) -> tuple[str, bool, bool]:
    """The line that says how a cell ended (as launch_cell says it, with its GPUs and time), whether it finished (a
    preempted cell counts as not), and whether it trained (for the sweep's estimate of the time left)."""
    result = _result(outcome)
    where = f"{outcome.job.label} on GPU {','.join(outcome.gpus)}"
    if result.get("skipped"):
        return f"[amdnn] {result['name']}: already finished, nothing trained ({where})", True, False
    accuracy = result.get("test_accuracy")
    line = f"[amdnn] {result['name']}: {result['status']}"
    if accuracy is not None:
        line += f"; final test accuracy {accuracy:.4f}"
    line += f" ({where}, {round(outcome.seconds)} s)"
    if result.get("error"):
        line += f"; error: {result['error'].strip().splitlines()[-1]}; output in {outcome.job.log}"
    return line, result["status"] == "finished", result["status"] == "finished"


def _describe_stop(outcome: Outcome, killed: bool) -> str:
    """Where a cell stopped on Ctrl-C or SIGTERM (as its run_cell said it), or that it was killed, or how it ended if
    it ended on its own meanwhile."""
    recorded = cellfiles.read_json(outcome.job.log.parent / JOB_RESULT) or {}
    if recorded.get("status") == "completed":
        return _describe(outcome)[0]
    if killed:
        where = "killed; it resumes from its last checkpoint"
    else:
        where = recorded.get("where") or f"stopped (exit status {outcome.returncode})"
    return f"[amdnn] {outcome.job.label}: {where} (output in {outcome.job.log})"
