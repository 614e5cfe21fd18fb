"""Which devices a cell's training process sees: its engine started, GPUs or nothing, without CUDA probe noise.

    start_engine(engine, gpus)       the training process's first call: the engine's framework imported, its GPUs
                                     listed, and GpusMissing raised where the cell asked for GPUs it does not see

TensorFlow's Linux wheel probes for CUDA when it is imported and when it first lists devices. Without an NVIDIA driver
that probe prints, on every cell start,

    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)

lines that read like failures. No TF_CPP_MIN_LOG_LEVEL silences them (models/cuda_probe); `start_engine` drops exactly
these lines from the process's stderr (file descriptor 2, where the C++ side writes) while TensorFlow starts and lists
its devices, and passes every other line through. A cell that asked for no GPU (cluster.gpus=0) is also kept off any
GPU of its node (CUDA_VISIBLE_DEVICES=""), so that the ops load their CPU build there (ops/tf_binding/library.py loads
the CUDA build whenever TensorFlow lists a GPU); a cell that asked for GPUs sees them as the scheduler gave them.

GPU or nothing: a cell that asked for GPUs (cluster.gpus > 0, on a scheduler preset or cluster=local) and whose engine
sees fewer is refused before it trains, never run on the CPU in their place. The refusal says why (the framework and
its build, what its CUDA probe said, the driver, CUDA_VISIBLE_DEVICES) and what would fix it.
"""
from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any, Mapping

from models.cuda_probe import PROBE_NOISE, dropping_lines
from models.engines import EngineError, import_keras, select
from orchestrator.cell import engines
from orchestrator.environment import DRIVER_FILE, nvidia_driver_present


class GpusMissing(EngineError):
    """The cell asked for GPUs its engine does not see here; the message says why and what would fix it. The
    training process answers it as refused: retrying on this node cannot help, and a CPU run is not what was asked."""


def prepare(gpus: int | None) -> bool:
    """Set the environment of this (training) process before its framework is imported, for a cell that asked for
    `gpus` (cluster.gpus; None: not set, whatever the machine has); True when CUDA's probe can only be noise here (no
    driver, or no GPU wanted)."""
    if gpus == 0:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return True
    return not nvidia_driver_present()


def start_engine(engine: str, gpus: int | None) -> int:
    """Start the cell's engine in this (training) process: make it Keras' backend, import its framework (quietly where
    CUDA's probe can only be noise) and count the GPUs it sees, which it returns. Raises GpusMissing where the cell
    asked for `gpus` > 0 (cluster.gpus, CellConfig.gpus) and the engine sees fewer. Called before anything imports
    Keras or trains.

    engine: tensorflow or torch (models.engines.ENGINES)."""
    select(engine)
    quiet = prepare(gpus)
    probe: list[str] = []
    with dropping_lines(PROBE_NOISE, dropped=probe) if quiet else contextlib.nullcontext():
        import_keras()  # and its framework, through it: first, so that nothing loads Keras' optional integrations
        seen, facts = engines.module(engine).gpus_seen()
    wanted = gpus or 0
    if seen < wanted:
        raise GpusMissing(_missing_message(engine, wanted, seen, facts, probe))
    return seen


def _missing_message(engine: str, wanted: int, seen: int, facts: Mapping[str, Any], probe: list[str]) -> str:
    """Why `engine` sees `seen` of the `wanted` GPUs here, and what would fix it."""
    name, version, cuda = facts["name"], facts["version"], facts["cuda"]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    driver = nvidia_driver_present()
    lines = [f"cluster.gpus={wanted} asks for {wanted} GPU{'s' if wanted > 1 else ''}, but engine={engine} sees "
             f"{seen or 'none'} on {socket.gethostname()}; the cell does not train on the CPU in their place.",
             f"  {name} {version}: " + ("a CPU-only build" if cuda is None else f"built with CUDA {cuda}")
             + ("" if cuda is None or facts["libraries"] else
                ", without the nvidia-* wheels of tensorflow[and-cuda] (its CUDA 12 and cuDNN 9 libraries must then "
                "come from LD_LIBRARY_PATH, e.g. the site's modules)"),
             "  NVIDIA driver: " + (_driver_version() if driver else f"none on this machine ({DRIVER_FILE} absent)"),
             "  CUDA_VISIBLE_DEVICES: " + ("unset" if visible is None else repr(visible))]
    said = [*facts["said"], *(line.split("] ", 1)[-1] for line in probe if "absl::InitializeLog" not in line)]
    said = list(dict.fromkeys(line for line in said if line))[:4]  # each once, in order
    if said:
        lines.append(f"  {name} said: " + " | ".join(said))
    fixes = []
    if not driver:
        fixes.append("run the cell on a GPU node (Slurm: a GPU partition, cluster.partition=...; PBS: a GPU queue, "
                     "e.g. Gadi's gpuvolta, which cluster=gadi asks for)")
    if visible is not None and len([d for d in visible.split(",") if d.strip()]) < wanted:
        fixes.append("let the process see the GPUs (unset CUDA_VISIBLE_DEVICES, or list as many as cluster.gpus)")
    if engine == "tensorflow" and (cuda is None or not facts["libraries"]):
        fixes.append("install TensorFlow's CUDA libraries: pip install -e .[gpu] (or `python3 -m "
                     "orchestrator.environment --gpu`), or load the site's CUDA 12 and cuDNN 9 modules "
                     "(cluster.modules)")
    if engine == "torch" and cuda is None:
        fixes.append("install a CUDA build of torch: pip install -e .[torch] where pip serves PyPI's Linux wheels "
                     "(CUDA builds); a CPU build already installed stays until `pip install --force-reinstall torch` "
                     "from PyPI or a CUDA index of download.pytorch.org")
    if driver and not fixes:
        fixes.append(f"check that the driver supports {name}'s CUDA ({cuda}) and that the GPUs are free (nvidia-smi)")
    fixes.append("or set cluster.gpus=0 to train on the CPU")
    lines.append("Fix: " + "; ".join(fixes) + ".")
    return "\n".join(lines)


def _driver_version() -> str:
    try:
        return Path(DRIVER_FILE).read_text().splitlines()[0].strip()
    except (OSError, IndexError):
        return "present (/dev/nvidia*)"
