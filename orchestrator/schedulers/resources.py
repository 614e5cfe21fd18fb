"""The schedulers this project submits to, and the one mapping of generic resource names onto each scheduler's own.

Configs (conf/cluster/*.yaml) speak only the generic names: walltime ("HH:MM:SS"), cpus, gpus (per node) and mem (GB).
Every other module translates through `scheduler_resources`, so adding a scheduler or a resource is one edit here.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Mapping

# The schedulers a cluster config may name (cluster.scheduler), and the script dialects of PBS.
SCHEDULERS = ("slurm", "pbs")
PBS_FLAVOURS = ("pbspro", "torque")

GENERIC_RESOURCES = ("walltime", "cpus", "gpus", "mem")

_WALLTIME = re.compile(r"^(?:(\d+):)?(\d{1,2}):(\d{2})$")


def walltime_seconds(walltime: str | int) -> int:
    """'HH:MM:SS' (or 'MM:SS', or an int of minutes) -> seconds; anything else is an error naming the format."""
    if isinstance(walltime, bool):
        raise ValueError(f"walltime {walltime!r}: expected 'HH:MM:SS', e.g. '48:00:00'")
    if isinstance(walltime, int):
        return walltime * 60
    m = _WALLTIME.match(str(walltime).strip())
    if not m:
        raise ValueError(f"walltime {walltime!r}: expected 'HH:MM:SS', e.g. '48:00:00' or '00:30:00'")
    h, mnt, s = (int(g) if g else 0 for g in m.groups())
    if mnt >= 60 or s >= 60:
        raise ValueError(f"walltime {walltime!r}: minutes and seconds must be below 60")
    total = h * 3600 + mnt * 60 + s
    if total <= 0:
        raise ValueError(f"walltime {walltime!r} must be positive")
    return total


def hms(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _slurm_minutes(walltime: str | int) -> int:
    # Slurm's unit is whole minutes (its smallest limit is 1 minute); round up so the user gets at least what they asked.
    return max(1, math.ceil(walltime_seconds(walltime) / 60))


def _gb(mem: Any) -> str:
    gb = float(mem)
    if gb <= 0:
        raise ValueError(f"mem {mem!r}: expected a positive number of GB, e.g. 16")
    return f"{int(gb)}GB" if gb == int(gb) else f"{int(gb * 1024)}MB"


def _count(name: str) -> Callable[[Any], int]:
    def convert(value: Any) -> int:
        if isinstance(value, bool) or int(value) != value or int(value) < 0:
            raise ValueError(f"{name} {value!r}: expected a whole number >= 0")
        return int(value)
    return convert


# generic name -> scheduler -> (the scheduler's parameter name in our script writers, converter from the generic value)
RESOURCE_NAMES: Mapping[str, Mapping[str, tuple[str, Callable[[Any], Any]]]] = {
    "walltime": {"slurm": ("time", _slurm_minutes), "pbs": ("walltime", lambda w: hms(walltime_seconds(w)))},
    "cpus": {"slurm": ("cpus_per_task", _count("cpus")), "pbs": ("ncpus", _count("cpus"))},
    "gpus": {"slurm": ("gpus_per_node", _count("gpus")), "pbs": ("ngpus", _count("gpus"))},
    "mem": {"slurm": ("mem", _gb), "pbs": ("mem", _gb)},
}
assert tuple(RESOURCE_NAMES) == GENERIC_RESOURCES and all(set(v) == set(SCHEDULERS) for v in RESOURCE_NAMES.values())


def setting(cluster: Mapping[str, Any], key: str) -> Any:
    """cluster[key], whose default lives in conf/cluster/_scheduler.yaml and nowhere in the code: a cluster config
    that lacks it (one not built on _scheduler) is an error that says where the default is."""
    if key not in cluster:
        raise ValueError(f"cluster.{key} is not set: every scheduler preset gets it from conf/cluster/_scheduler.yaml "
                         f"(defaults: [_scheduler]); add that default to your cluster config or set cluster.{key}")
    return cluster[key]


def warn_before_s(cluster: Mapping[str, Any]) -> int:
    """Seconds before the walltime at which a job checkpoints (cluster.warn_before_s, or a tenth of the walltime
    between 10 s and 10 min: long enough to write a checkpoint, short enough to waste little of the allocation)."""
    total = walltime_seconds(setting(cluster, "walltime"))
    value = setting(cluster, "warn_before_s")
    if value is None:
        value = min(600, max(10, total // 10))
    value = int(value)
    if not 0 < value < total:
        raise ValueError(f"cluster.warn_before_s={value} must be positive and below the walltime "
                         f"({cluster['walltime']} = {total} s); e.g. {max(1, total // 10)}")
    return value


def check_scheduler(name: str) -> str:
    if name not in SCHEDULERS:
        raise ValueError(f"cluster.scheduler={name!r} is not a scheduler this project knows; valid: {', '.join(SCHEDULERS)}")
    return name


def scheduler_resources(scheduler: str, cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The generic resources of a cluster config in `scheduler`'s own names and units (unset or 0 GPUs left out)."""
    check_scheduler(scheduler)
    out: dict[str, Any] = {}
    for generic, per in RESOURCE_NAMES.items():
        value = cluster.get(generic)
        if value is None or (generic == "gpus" and not value):
            continue
        name, convert = per[scheduler]
        try:
            out[name] = convert(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"cluster.{generic}: {e}") from None
    return out


# submitit's own generic parameter names (AutoExecutor.update_parameters) -> ours, for executors built on this table.
SUBMITIT_GENERIC = {"timeout_min": "walltime", "cpus_per_task": "cpus", "gpus_per_node": "gpus", "mem_gb": "mem"}
