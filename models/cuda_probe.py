"""TensorFlow's CUDA probe, kept off a machine's stderr where it can only be noise (no NVIDIA driver, or no GPU wanted).

    with dropping_lines(PROBE_NOISE):      # drop exactly the probe's lines from fd 2 while inside; pass the rest
    quiet_probe_for_this_command()         # a command's first call, before TensorFlow loads: the same, to its end

TensorFlow's Linux wheel probes for CUDA when it is imported and when it first lists devices. Without an NVIDIA driver
that probe prints

    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)

lines that read like failures. They are written before TensorFlow reads TF_CPP_MIN_LOG_LEVEL (TensorFlow 2.21: level 3
leaves them), so no setting silences them; the filter drops exactly these lines from file descriptor 2 (where the C++
side writes) and passes every other line through, in order. Standard library only: a command calls it first.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import threading
from typing import Iterator

# The probe's lines (TensorFlow 2.21, XLA's CUDA platform); nothing else is ever dropped.
PROBE_NOISE = re.compile(r"cudart_stub\.cc:\d+\] Could not find cuda drivers|failed call to cuInit|"
                         r"cuda_(?:platform|executor|diagnostics)\.cc:\d+\]|"
                         r"All log messages before absl::InitializeLog\(\) is called")

# The files of a loaded NVIDIA driver, as orchestrator.environment.nvidia_driver_present reads them (that module is
# the launcher's bootstrap, above this layer).
DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidia0")


@contextlib.contextmanager
def dropping_lines(pattern: re.Pattern, fd: int = 2, dropped: list[str] | None = None) -> Iterator[None]:
    """While inside, lines written to file descriptor `fd` (by Python or by C++) that match `pattern` are dropped
    (appended to `dropped` if given, once the block ends); the others reach the original `fd` unchanged, in order."""
    sys.stderr.flush()
    saved = os.dup(fd)
    read_end, write_end = os.pipe()
    os.dup2(write_end, fd)
    os.close(write_end)

    def forward() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                text = line.decode(errors="replace")
                if not pattern.search(text):
                    os.write(saved, line)
                elif dropped is not None:
                    dropped.append(text.rstrip())

    thread = threading.Thread(target=forward, name="amdnn-stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, fd)   # closes the pipe's last write end: the thread reads to the end and stops
        thread.join(timeout=10)
        os.close(saved)


def quiet_probe_for_this_command() -> None:
    """For a command-line tool that may load TensorFlow on a machine without an NVIDIA driver: drop the probe's lines
    from now until the interpreter exits (the filter is closed at exit, after an uncaught exception's traceback has
    been written, so that nothing else is lost). With a driver, nothing changes: the probe then says something."""
    if any(os.path.exists(f) for f in DRIVER_FILES):
        return
    filtering = dropping_lines(PROBE_NOISE)
    filtering.__enter__()
    atexit.register(filtering.__exit__, None, None, None)
