"""Slurm through submitit: a cluster config (conf/cluster/slurm.yaml) -> the parameters of submitit's SlurmExecutor,
and the job script they produce (submitit's own writer, after our validation), which jobs/slurm.sbatch mirrors.

Differences from hydra-submitit-launcher's defaults, and why:
- requeue on walltime and preemption is on (at most cluster.max_requeues times) instead of off;
- the warning comes `warn_before_s` before the limit, derived from the walltime (a tenth, between 10 s and 10 min)
  rather than a fixed 120 s, which for a short walltime fires at once and exhausts the requeues;
- the warning signal is USR1: Slurm signals every process of the job step, and the cell's training process treats
  USR1 as "checkpoint now" (and SIGTERM as "being stopped"), while an unhandled USR2 would kill it.
Preemption: Slurm sends SIGTERM (after GraceTime, SIGKILL); the job checkpoints, and `--requeue` lets a
PreemptMode=REQUEUE cluster put it back in the queue; under PreemptMode=CANCEL the resume cron resubmits the cell.
"""
from __future__ import annotations

import typing as tp
from pathlib import Path

from submitit.slurm.slurm import _make_sbatch_string

from orchestrator.schedulers import scripts
from orchestrator.schedulers.resources import scheduler_resources, setting, warn_before_s

WARNING_SIGNAL = "USR1"


def slurm_parameters(cluster: tp.Mapping[str, tp.Any], job_name: str) -> tp.Dict[str, tp.Any]:
    """submitit SlurmExecutor.update_parameters(**this) for a cluster config."""
    params: tp.Dict[str, tp.Any] = dict(scheduler_resources("slurm", cluster))
    params["job_name"] = scripts.word("cluster.job_name", job_name)
    for key in ("partition", "account", "qos", "constraint"):
        if cluster.get(key) is not None:
            params[key] = scripts.word(f"cluster.{key}", cluster[key])
    delay = warn_before_s(cluster)
    params["signal_delay_s"] = delay
    params["setup"] = scripts.environment_lines(cluster.get("modules") or (), cluster.get("env") or {},
                                                cluster.get("setup") or ())
    params["array_parallelism"] = int(setting(cluster, "array_parallelism"))
    # Overrides submitit's --signal=USR2@delay (see the module docstring); --requeue lets the job requeue itself.
    params["additional_parameters"] = {"signal": f"{WARNING_SIGNAL}@{delay}", "requeue": True}
    return params


def make_sbatch_script(command: str, folder: tp.Union[str, Path], **params: tp.Any) -> str:
    """The sbatch script submitit writes for these parameters (pure; golden-tested)."""
    scripts.text("folder", folder)
    return _make_sbatch_string(command=command, folder=folder, **params)
