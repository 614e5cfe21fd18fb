"""A cluster config (conf/cluster/pbs.yaml, gadi.yaml) -> the parameters of PBSExecutor (= make_pbs_script's)."""
from __future__ import annotations

import typing as tp

from orchestrator.schedulers import scripts
from orchestrator.schedulers.resources import PBS_FLAVOURS, scheduler_resources, warn_before_s


def pbs_parameters(cluster: tp.Mapping[str, tp.Any], job_name: str) -> tp.Dict[str, tp.Any]:
    flavour = cluster.get("flavour") or "pbspro"
    if flavour not in PBS_FLAVOURS:
        raise ValueError(f"cluster.flavour={flavour!r}: valid PBS flavours are {', '.join(PBS_FLAVOURS)}")
    for key in cluster.get("required") or ():
        if cluster.get(key) in (None, "", "None"):
            raise ValueError(f"cluster={cluster.get('name')} needs cluster.{key}, e.g. cluster.{key}=ab12 on the command "
                             f"line (for Gadi: your NCI project code; $PROJECT is not set here)")
    params: tp.Dict[str, tp.Any] = dict(scheduler_resources("pbs", cluster))
    params.update(job_name=scripts.word("cluster.job_name", job_name), flavour=flavour,
                  warn_before_s=warn_before_s(cluster))
    for key in ("queue", "project", "account", "storage", "jobfs"):
        if cluster.get(key) is not None:
            params[key] = str(cluster[key])
    for key in ("modules", "setup"):
        if cluster.get(key):
            params[key] = [str(v) for v in cluster[key]]
    if cluster.get("env"):
        params["env"] = {str(k): str(v) for k, v in dict(cluster["env"]).items()}
    return params
