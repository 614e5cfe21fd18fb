"""What a partition (Slurm) or queue (PBS) can ever give one job, and the refusal of a request beyond it.

A job asking for more CPUs, memory or GPUs than any node of its partition has, or a longer walltime than the partition
allows, never starts: Slurm leaves it PENDING for ever (reason PartitionConfig or Resources) and PBS may hold it. So
the launch asks the scheduler once, before submitting, and refuses such a request with the limit in the message:

    Slurm   scontrol show partition -o     MaxTime, MaxCPUsPerNode, MaxMemPerNode, Default=YES, its nodes
            sinfo -N -h -p PART -o ...      each node's CPUs, memory (MB) and GPUs (gres)
    PBS     qstat -Qf QUEUE                 resources_max.{ncpus,mem,ngpus,walltime} (resources_min.ncpus)

`request_problems(cluster)` lists what is wrong (empty: fine, or limits the scheduler would not tell). A scheduler that
cannot be asked (no sinfo, qstat -Qf unsupported, as with Slurm's Torque wrappers) checks nothing: the request goes
through as before, and `status` shows the scheduler's reason if it then waits.
"""
from __future__ import annotations

import re
import subprocess
import typing as tp
from dataclasses import dataclass, field

from orchestrator.schedulers.resources import check_scheduler, hms, walltime_seconds

QUERY_TIMEOUT_S = 60
UNLIMITED = ("UNLIMITED", "INFINITE", "NONE", "")


@dataclass
class Node:
    """One node, or for PBS the largest single job a queue accepts."""
    name: str
    cpus: int | None = None
    mem_mb: int | None = None
    gpus: int | None = None


@dataclass
class Limits:
    """What one partition or queue offers. None: no limit known."""
    where: str                      # "Slurm partition debug", "PBS queue gpuvolta"
    nodes: list[Node] = field(default_factory=list)
    max_walltime_s: int | None = None
    max_cpus: int | None = None     # per node (Slurm MaxCPUsPerNode) or per job (PBS resources_max.ncpus)
    max_mem_mb: int | None = None
    max_gpus: int | None = None
    min_cpus: int | None = None     # PBS resources_min.ncpus (Gadi's gpuvolta: 12 per GPU)
    source: str = ""                # the commands the numbers came from


def _run(command: list[str]) -> str | None:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


# ---- Slurm ---------------------------------------------------------------------------------------------------------
def slurm_seconds(text: str) -> int | None:
    """Slurm's time limit syntax (MaxTime: "UNLIMITED", "30", "30:00", "2:00:00", "1-00:00:00", "1-2") -> seconds;
    None for no limit."""
    text = text.strip()
    if text.upper() in UNLIMITED:
        return None
    days, rest = text.split("-", 1) if "-" in text else ("0", text)
    parts = [int(p) for p in rest.split(":")]
    if "-" in text:  # days-hours[:minutes[:seconds]]
        h, m, s = (parts + [0, 0])[:3]
    else:  # minutes, minutes:seconds, or hours:minutes:seconds
        h, m, s = {1: (0, parts[0], 0), 2: (0, *parts), 3: tuple(parts)}[len(parts)]
    return int(days) * 86400 + h * 3600 + m * 60 + s


def _fields(line: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in line.split() if "=" in part)


def _number(value: str | None) -> int | None:
    return None if value is None or value.upper() in UNLIMITED or not value.isdigit() else int(value)


def _gres_gpus(gres: str) -> int:
    """GPUs in a node's gres ("gpu:a100:4(S:0-1),shard:8" -> 4; "(null)" -> 0)."""
    total = 0
    for item in gres.split(","):
        parts = re.sub(r"\(.*?\)", "", item).split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def parse_slurm(partitions: str, nodes: str, partition: str | None) -> Limits | None:
    """`scontrol show partition -o` and `sinfo -N -h -o %N|%c|%m|%G` -> the Limits of `partition` (None: the
    default one); None when it is not there."""
    table = [_fields(line) for line in partitions.splitlines() if line.startswith("PartitionName=")]
    chosen = next((p for p in table if p["PartitionName"] == partition) if partition else
                  (p for p in table if p.get("Default") == "YES"), None)
    if chosen is None:
        return None
    limits = Limits(where=f"Slurm partition {chosen['PartitionName']}",
                    max_walltime_s=slurm_seconds(chosen.get("MaxTime", "UNLIMITED")),
                    max_cpus=_number(chosen.get("MaxCPUsPerNode")),
                    max_mem_mb=_number(chosen.get("MaxMemPerNode")),
                    source="scontrol show partition, sinfo -N")
    for line in nodes.splitlines():
        name, cpus, mem, gres = (line.strip().split("|") + ["", "", "", ""])[:4]
        if name and cpus.isdigit():
            limits.nodes.append(Node(name, int(cpus), int(mem) if mem.isdigit() else None, _gres_gpus(gres)))
    return limits


class UnknownPlace(LookupError):
    """The partition or queue the config names is not one the scheduler has."""


def slurm_limits(partition: str | None) -> Limits | None:
    partitions = _run(["scontrol", "show", "partition", "-o"])
    if partitions is None:
        return None
    names = [f["PartitionName"] for f in map(_fields, partitions.splitlines()) if "PartitionName" in f]
    if partition and names and partition not in names:
        raise UnknownPlace(f"cluster.partition={partition} is not a partition of this Slurm; its partitions: "
                           f"{', '.join(names)} (scontrol show partition)")
    name = partition or next((f["PartitionName"] for f in map(_fields, partitions.splitlines())
                              if f.get("Default") == "YES"), None)
    if name is None:
        return None
    nodes = _run(["sinfo", "-N", "-h", "-p", name, "-o", "%N|%c|%m|%G"]) or ""
    # sinfo lists a node once per partition it is in; -p keeps this one's.
    return parse_slurm(partitions, nodes, name)


# ---- PBS -----------------------------------------------------------------------------------------------------------
_PBS_MEM = re.compile(r"^(\d+)([kmgtp]?)(b|w)?$", re.IGNORECASE)
_PBS_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def pbs_mem_mb(text: str) -> int | None:
    """PBS size ("3000gb", "190000mb", "96GB", "1tb", "512kb", "8w") -> MB (a word is 8 bytes)."""
    m = _PBS_MEM.match(text.strip())
    if not m:
        return None
    size = int(m.group(1)) * _PBS_UNIT[m.group(2).lower()] * (8 if (m.group(3) or "b").lower() == "w" else 1)
    return size // (1 << 20)


def parse_pbs_queue(text: str, queue: str) -> Limits | None:
    """`qstat -Qf QUEUE` (PBS Pro / Torque text: "Queue: NAME" then "key = value" lines) -> its Limits."""
    queues: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Queue:"):
            current = queues.setdefault(line.split(":", 1)[1].strip(), {})
        elif " = " in line:
            key, value = line.split(" = ", 1)
            current[key.strip()] = value.strip()
    if queue not in queues:
        return None
    attrs = queues[queue]
    wall = attrs.get("resources_max.walltime")
    return Limits(where=f"PBS queue {queue}",
                  max_walltime_s=walltime_seconds(wall) if wall else None,
                  max_cpus=_number(attrs.get("resources_max.ncpus")),
                  max_mem_mb=pbs_mem_mb(attrs["resources_max.mem"]) if "resources_max.mem" in attrs else None,
                  max_gpus=_number(attrs.get("resources_max.ngpus")),
                  min_cpus=_number(attrs.get("resources_min.ncpus")),
                  source=f"qstat -Qf {queue}")


def pbs_limits(queue: str | None) -> Limits | None:
    if not queue:
        return None  # the server's default queue: PBS routes the job; its limits are not ours to guess
    text = _run(["qstat", "-Qf", queue])
    return parse_pbs_queue(text, queue) if text else None


# ---- the check -----------------------------------------------------------------------------------------------------
def limits_of(cluster: tp.Mapping[str, tp.Any]) -> Limits | None:
    scheduler = check_scheduler(str(cluster["scheduler"]))
    if scheduler == "slurm":
        return slurm_limits(cluster.get("partition"))
    return pbs_limits(cluster.get("queue"))


def _gb(mb: int) -> str:
    return f"{mb / 1024:.0f} GB" if mb >= 10 * 1024 else f"{mb / 1024:.1f} GB"


def check_request(cluster: tp.Mapping[str, tp.Any], limits: Limits) -> list[str]:
    """What in the cluster config's request `limits` can never give (each with the limit and the key to change)."""
    cpus, gpus = int(cluster.get("cpus") or 1), int(cluster.get("gpus") or 0)
    mem_mb = int(float(cluster["mem"]) * 1024) if cluster.get("mem") else 0
    problems = []
    wall = walltime_seconds(cluster["walltime"]) if cluster.get("walltime") else None
    if wall and limits.max_walltime_s is not None and wall > limits.max_walltime_s:
        problems.append(f"cluster.walltime={cluster['walltime']} exceeds the {limits.where} limit of "
                        f"{hms(limits.max_walltime_s)}: set cluster.walltime<={hms(limits.max_walltime_s)} (a longer "
                        "cell continues in the next job)")
    for key, asked, cap, unit in (("cpus", cpus, limits.max_cpus, " CPUs"), ("gpus", gpus, limits.max_gpus, " GPUs")):
        if cap is not None and asked > cap:
            problems.append(f"cluster.{key}={asked} exceeds the {limits.where} limit of {cap}{unit} per job: set "
                            f"cluster.{key}<={cap}")
    if limits.max_mem_mb is not None and mem_mb > limits.max_mem_mb:
        problems.append(f"cluster.mem={cluster['mem']} exceeds the {limits.where} limit of {_gb(limits.max_mem_mb)} "
                        f"per job: set cluster.mem<={limits.max_mem_mb // 1024}")
    if limits.min_cpus is not None and cpus < limits.min_cpus:
        problems.append(f"cluster.cpus={cpus} is below the {limits.where} minimum of {limits.min_cpus} CPUs: set "
                        f"cluster.cpus>={limits.min_cpus}")
    if limits.nodes and not any(_fits(n, cpus, mem_mb, gpus) for n in limits.nodes):
        problems.append(_no_node(limits, cpus, mem_mb, gpus, cluster))
    return problems


def _fits(node: Node, cpus: int, mem_mb: int, gpus: int) -> bool:
    return ((node.cpus is None or cpus <= node.cpus) and (node.mem_mb is None or mem_mb <= node.mem_mb)
            and (node.gpus is None or gpus <= node.gpus))


def _no_node(limits: Limits, cpus: int, mem_mb: int, gpus: int, cluster: tp.Mapping[str, tp.Any]) -> str:
    """No node has cpus, mem and gpus at once: name what is short, against the largest node of each."""
    most = Node("", max((n.cpus or 0) for n in limits.nodes), max((n.mem_mb or 0) for n in limits.nodes),
                max((n.gpus or 0) for n in limits.nodes))
    short = []
    if cpus > most.cpus:
        short.append(f"cluster.cpus={cpus} but the largest has {most.cpus} CPUs (set cluster.cpus<={most.cpus})")
    if mem_mb > most.mem_mb:
        short.append(f"cluster.mem={cluster['mem']} but the largest has {_gb(most.mem_mb)} (set "
                     f"cluster.mem<={most.mem_mb // 1024})")
    if gpus > most.gpus:
        short.append(f"cluster.gpus={gpus} but the largest has {most.gpus} GPUs (set cluster.gpus<={most.gpus})")
    if not short:
        short.append(f"{cpus} CPUs, {_gb(mem_mb)} and {gpus} GPUs are not all on one node")
    described = ", ".join(f"{n.name}: {n.cpus} CPUs, {_gb(n.mem_mb or 0)}, {n.gpus or 0} GPUs"
                          for n in limits.nodes[:4]) + (", ..." if len(limits.nodes) > 4 else "")
    count = "the node" if len(limits.nodes) == 1 else f"each of its {len(limits.nodes)} nodes"
    return (f"no node of {limits.where} can run this job, which would pend for ever: " + "; ".join(short) +
            f". {count[0].upper() + count[1:]} ({limits.source}): {described}")


def request_problems(cluster: tp.Mapping[str, tp.Any]) -> list[str]:
    """The problems of the cluster config's request against what its scheduler reports (see the module docstring)."""
    limits = limits_of(cluster)
    return [] if limits is None else check_request(cluster, limits)


def sweep_problems(clusters: tp.Iterable[tp.Mapping[str, tp.Any]]) -> list[str]:
    """request_problems for each distinct request of a sweep's cells (one scheduler query per partition or queue)."""
    seen: dict[str, Limits | None] = {}
    problems: list[str] = []
    for cluster in clusters:
        if not cluster.get("scheduler"):
            continue
        where = f"{cluster['scheduler']}:{cluster.get('partition') or cluster.get('queue') or ''}"
        if where not in seen:
            try:
                seen[where] = limits_of(cluster)
            except UnknownPlace as e:
                seen[where] = None
                problems.append(str(e))
        limits = seen[where]
        for problem in [] if limits is None else check_request(cluster, limits):
            if problem not in problems:
                problems.append(problem)
    return problems
