"""The GPUs of this machine, and which of them each cell of a local sweep gets.

    ids = machine_gpus(cluster)            # ("0", "1", "2", "3"): cluster.gpu_ids, else CUDA_VISIBLE_DEVICES, else nvidia-smi -L
    per_cell = gpus_per_cell(cluster, ids) # cluster.gpus, or 1 where there are GPUs and it is null; 0: CPU cells
    pool = GpuPool(ids, per_cell)          # pool.at_once == len(ids) // per_cell
    mine = pool.take()                     # ("2",), or None while every free GPU is lent
    pool.give_back(mine)                   # when the cell's process ends, however it ended

Ids are CUDA_VISIBLE_DEVICES entries of the machine (indices or GPU-UUIDs), handed to each cell's process unchanged,
so a launch restricted with CUDA_VISIBLE_DEVICES=2,3 lends GPUs 2 and 3. Pure functions and a small class, no
processes: the placement is tested with fake ids (AMDNN_FAKE_GPU_IDS, read by machine_gpus, is that test hook).
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import Any, Callable, Mapping, Sequence

FAKE_IDS_VARIABLE = "AMDNN_FAKE_GPU_IDS"  # tests: "a,b" stands for a machine with these GPUs (see machine_gpus)

_NVIDIA_SMI_GPU = re.compile(r"^GPU (\d+):", re.MULTILINE)  # `nvidia-smi -L`: "GPU 0: NVIDIA H100 ... (UUID: ...)"


class GpuRequestError(ValueError):
    """cluster.gpus or cluster.gpu_ids asks for what this machine does not have; the message says what would do."""


def _ids(value: Any) -> tuple[str, ...]:
    """A list of ids, or a comma-separated string of them (as CUDA_VISIBLE_DEVICES writes them)."""
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    out: list[str] = []
    for item in (i.strip() for i in items):
        if item.startswith("-") or item.lower() == "nodevfiles":  # CUDA stops at the first invalid entry
            break
        if item:
            out.append(item)
    return tuple(out)


def nvidia_smi_gpus(run: Callable[..., Any] = subprocess.run) -> tuple[str, ...]:
    """The indices `nvidia-smi -L` lists; () where it is missing or fails (no driver, no GPU)."""
    try:
        proc = run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ()
    if proc.returncode != 0:
        return ()
    return tuple(_NVIDIA_SMI_GPU.findall(proc.stdout))


def machine_gpus(cluster: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                 run: Callable[..., Any] = subprocess.run) -> tuple[tuple[str, ...], str]:
    """(the GPU ids a local sweep may lend, where they came from). In order: AMDNN_FAKE_GPU_IDS (tests), cluster.gpu_ids,
    CUDA_VISIBLE_DEVICES of the launching process (set and empty: no GPU), every GPU that `nvidia-smi -L` lists."""
    environ = os.environ if environ is None else environ
    if environ.get(FAKE_IDS_VARIABLE):
        return _ids(environ[FAKE_IDS_VARIABLE]), f"{FAKE_IDS_VARIABLE} (fake ids)"
    if cluster.get("gpu_ids") is not None:
        ids = _ids(cluster["gpu_ids"])
        if len(set(ids)) != len(ids):
            raise GpuRequestError(f"cluster.gpu_ids={list(ids)} names a GPU twice; name each once, e.g. [0,1]")
        return ids, "cluster.gpu_ids"
    if "CUDA_VISIBLE_DEVICES" in environ:
        return _ids(environ["CUDA_VISIBLE_DEVICES"]), "CUDA_VISIBLE_DEVICES"
    return nvidia_smi_gpus(run), "nvidia-smi -L"


def gpus_per_cell(cluster: Mapping[str, Any], ids: Sequence[str], source: str = "this machine") -> int:
    """cluster.gpus of a local sweep: null is 1 where there are GPUs, else 0; 0 trains on the CPU, one cell at a time.
    A number this machine cannot give is an error that names what it has."""
    wanted = cluster.get("gpus")
    if wanted is None:
        return 1 if ids else 0
    if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0:
        raise GpuRequestError(f"cluster.gpus={wanted!r}: expected a whole number of GPUs per cell >= 0, or null "
                              f"(1 where the machine has GPUs)")
    if wanted > len(ids):
        has = f"{len(ids)} ({','.join(ids)})" if ids else "none"
        raise GpuRequestError(f"cluster.gpus={wanted} GPUs per cell, but the GPUs here ({source}) are {has}: set "
                              f"cluster.gpus<={len(ids)}" + (", or " if ids else " ") +
                              "cluster.gpus=0 to train on the CPU, one cell at a time")
    return wanted


class GpuPool:
    """Lends `per_cell` GPUs at a time out of `ids`, never one id to two cells at once; floor(len/per_cell) at once."""

    def __init__(self, ids: Sequence[str], per_cell: int) -> None:
        if per_cell < 1 or per_cell > len(ids):
            raise GpuRequestError(f"{per_cell} GPUs per cell out of {len(ids)}: expected 1 to {len(ids)}")
        if len(set(ids)) != len(ids):
            raise GpuRequestError(f"GPU ids {list(ids)} name a GPU twice")
        self.ids = tuple(ids)
        self.per_cell = per_cell
        self.free = list(self.ids)  # in the machine's order: the lowest free ids go first
        self.lent: set[str] = set()

    @property
    def at_once(self) -> int:
        return len(self.ids) // self.per_cell

    def take(self) -> tuple[str, ...] | None:
        """The next cell's GPUs, or None while fewer than per_cell are free."""
        if len(self.free) < self.per_cell:
            return None
        mine = tuple(self.free[:self.per_cell])
        del self.free[:self.per_cell]
        self.lent.update(mine)
        return mine

    def give_back(self, mine: Sequence[str]) -> None:
        """Return a cell's GPUs (it finished, failed or was stopped); an id not lent is an error, never a second copy."""
        if not set(mine) <= self.lent:
            raise ValueError(f"GPUs {list(mine)} were not lent (lent now: {sorted(self.lent)})")
        self.lent.difference_update(mine)
        self.free = [i for i in self.ids if i in set(self.free) | set(mine)]
