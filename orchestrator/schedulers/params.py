"""A cluster config -> the parameters of its scheduler's executor (submitit's SlurmExecutor, or PBSExecutor), with
the project made importable inside the job.

The one translation, used twice: by `config.validate`, so that a config the launcher would refuse is refused before
anything runs, and by the cluster launcher, which submits with these parameters.
"""
from __future__ import annotations

import shlex
import typing as tp

from orchestrator.common import paths
from orchestrator.schedulers.pbs.params import pbs_parameters
from orchestrator.schedulers.resources import check_scheduler
from orchestrator.schedulers.slurm import slurm_parameters


def executor_parameters(scheduler: str, cluster: tp.Mapping[str, tp.Any]) -> tp.Dict[str, tp.Any]:
    """The executor's parameters for a cluster config, with the project made importable in the job: the job unpickles
    the launcher, whose class lives in the repository (orchestrator/, and its hydra_plugins name in
    orchestrator/cluster/plugin_root)."""
    check_scheduler(scheduler)
    job_name = str(cluster.get("job_name") or "amdnn")
    repo = paths.repo_root()
    python_path = f"{repo}:{repo / 'orchestrator' / 'cluster' / 'plugin_root'}"
    setup = [f"export PYTHONPATH={shlex.quote(python_path)}${{PYTHONPATH:+:$PYTHONPATH}}",
             *(cluster.get("setup") or ())]
    cluster = {**cluster, "setup": setup}
    if scheduler == "slurm":
        return slurm_parameters(cluster, job_name)
    return pbs_parameters(cluster, job_name)
