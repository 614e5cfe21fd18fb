"""Which devices a cell's training process sees, and a TensorFlow start without CUDA probe noise.

TensorFlow's Linux wheel probes for CUDA when it is imported and when it first lists devices. Without an NVIDIA driver
that probe prints, on every cell start,

    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)

lines that read like failures. They are written before TensorFlow reads TF_CPP_MIN_LOG_LEVEL (TensorFlow 2.21: level 3
leaves them), so no setting silences them; `start_tensorflow` drops exactly these lines from the process's stderr
(file descriptor 2, where the C++ side writes) while TensorFlow starts and lists its devices, and passes every other
line through. A cell that asked for no GPU (cluster.gpus=0) is also kept off any GPU of its node
(CUDA_VISIBLE_DEVICES=""), so that the ops load their CPU build there (ops/tf_binding/library.py loads the CUDA build
whenever TensorFlow lists a GPU); a cell that asked for GPUs sees them as the scheduler gave them.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from pathlib import Path
from typing import Iterator

from orchestrator.config.cell import CellConfig

# The probe's lines (TensorFlow 2.21, XLA's CUDA platform); nothing else is ever dropped.
PROBE_NOISE = re.compile(r"cudart_stub\.cc:\d+\] Could not find cuda drivers|failed call to cuInit|"
                         r"cuda_(?:platform|executor|diagnostics)\.cc:\d+\]|"
                         r"All log messages before absl::InitializeLog\(\) is called")


def gpus_wanted(cfg: CellConfig) -> int | None:
    """cluster.gpus of the cell (0 on every scheduler preset unless asked), None where the cell runs locally."""
    return cfg.gpus


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA kernel driver loaded (the only way CUDA can find a GPU)."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/nvidia0").exists()


def prepare(cfg: CellConfig) -> bool:
    """Set the environment of this (training) process before TensorFlow is imported; True when CUDA's probe can only
    be noise here (no driver, or no GPU wanted)."""
    if gpus_wanted(cfg) == 0:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        return True
    return not nvidia_driver_present()


@contextlib.contextmanager
def dropping_lines(pattern: re.Pattern, fd: int = 2) -> Iterator[None]:
    """While inside, lines written to file descriptor `fd` (by Python or by C++) that match `pattern` are dropped;
    the others reach the original `fd` unchanged, in order."""
    sys.stderr.flush()
    saved = os.dup(fd)
    read_end, write_end = os.pipe()
    os.dup2(write_end, fd)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not pattern.search(line.decode(errors="replace")):
                    os.write(saved, line)

    thread = threading.Thread(target=forward, name="amdnn-stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)   # closes the pipe's last write end: the thread reads to the end and stops
        thread.join(timeout=10)
        os.close(saved)


def start_tensorflow(cfg: CellConfig) -> None:
    """Import TensorFlow and list its GPUs (where the CUDA probe happens) for the cell `cfg`, quietly where the probe
    can only be noise. Called by the training process before anything else touches TensorFlow."""
    quiet = prepare(cfg)
    with dropping_lines(PROBE_NOISE) if quiet else contextlib.nullcontext():
        import tensorflow as tf  # here, inside the filter: the import is where CUDA's probe prints

        tf.config.list_physical_devices("GPU")
