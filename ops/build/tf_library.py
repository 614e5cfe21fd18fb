"""The TensorFlow library of the ops: built on first use into a cache shared safely by processes, users' nodes and
CPU generations.

The library is compiled against the installed TensorFlow (flags from tf.sysconfig) for one CPU target: the best
x86-64 micro-architecture level the running CPU supports (x86-64-v4 with or without AVX-512 VBMI, v3, v2, or the
baseline; ops/build/common.py), never `-march=native`, so a cache directory shared by nodes of different
generations never hands a node an instruction it lacks: the target is part of the cache key, next to a hash of the
sources, the TensorFlow version and the compiler. When a job array starts at once, one process builds under a file
lock and the others wait and load the same file. With a CudaConfig (ops/build/cuda.py) the library holds the GPU
kernels too, and its cache key adds the CUDA version and the architectures. The command is ops/build/__main__.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import filelock

from ops.build import cuda as cuda_build
from ops.build.common import (CORE_SOURCES, SOURCE_DIR, BuildError, cache_root, compiler, compiler_version,
                              cpu_target, cxx_flags, nvcc_flags, source_hash)

# The TF binding's sources (op interfaces, CPU kernels; and cuda.GPU_KERNEL_SOURCE in a CUDA build) on top of the
# core. They compile as one unit (`_binding_unit`): TensorFlow's headers are most of each one's compile, parsed once
# instead of two or three times; the core's sources include none.
TF_BINDING_SOURCES = ("ops_interface.cc", "kernels_cpu.cc")
LIBRARY_NAME = "libamdnn_ops.so"
SUPPORTED_TF = "2.21"  # the TF minor the ops are written and tested against (pyproject pins the same)
LIBRARY_FLAGS = cxx_flags(shared_object=True)


@dataclass(frozen=True)
class BuildInfo:
    """What was built, where, and for what."""

    library: str
    target: str
    tensorflow: str
    compiler: str
    source_hash: str
    built_at: str
    cuda: str | None = None  # nvcc's release when the GPU kernels are in the library
    cuda_arch: str | None = None  # what they were compiled for, e.g. "sm_70,sm_80,sm_90,compute_90"


def _tensorflow():
    import tensorflow as tf  # here, not at the top: importing the build (torch build, run facts) loads no TensorFlow

    if not tf.__version__.startswith(SUPPORTED_TF + "."):
        raise BuildError(f"TensorFlow {tf.__version__} is installed; the ops are built for TensorFlow {SUPPORTED_TF}.x "
                         f"(pip install 'tensorflow=={SUPPORTED_TF}.*').")
    return tf


def _build_key(tf_version: str, target: str, cxx_version: str, cuda=None) -> str:
    parts = [source_hash(), tf_version, target, cxx_version, LIBRARY_FLAGS]
    if cuda is not None:  # a CPU-only key stays what it was
        parts += [cuda.version, list(cuda.archs), nvcc_flags()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


def library_dir(cuda=None) -> Path:
    """The cache folder of the library for this source, TF, CPU target and compiler, and for `cuda` (a
    cuda_build.CudaConfig) its CUDA version and architectures (whether built or not)."""
    tf = _tensorflow()
    cxx = compiler()
    target, _ = cpu_target()
    key = _build_key(tf.__version__, target, compiler_version(cxx), cuda)
    gpu = f"cuda{cuda.version}-{cuda.arch_text.replace(',', '+')}-" if cuda is not None else ""
    return cache_root() / f"{target}-tf{tf.__version__}-{gpu}{key}"


def _binding_unit(scratch: Path, sources: list[str]) -> Path:
    """One translation unit of the TF binding's `sources` (each included as it is: their names do not collide), so
    that TensorFlow's headers are parsed once: ~14-20 CPU s a parse on the 2-core development machine."""
    unit = scratch / "tf_binding.cc"
    unit.write_text("".join(f'#include "{SOURCE_DIR / name}"\n' for name in sources))
    return unit


def _compile(out: Path, cuda=None) -> None:
    tf = _tensorflow()
    cxx = compiler()
    _, target_flags = cpu_target()
    flags = [*LIBRARY_FLAGS, *target_flags, *tf.sysconfig.get_compile_flags()]
    binding = list(TF_BINDING_SOURCES)
    binding_flags = flags
    if cuda is not None:
        binding.append(cuda_build.GPU_KERNEL_SOURCE)
        binding_flags = [*flags, *cuda_build.gpu_kernel_flags(tf.sysconfig.get_include())]
    objects = []
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        commands = [(binding_flags, _binding_unit(Path(scratch), binding))]
        commands += [(flags, SOURCE_DIR / name) for name in CORE_SOURCES]
        # One compiler per unit, in parallel (the core sources and the CUDA ones include no TF headers).
        procs = []
        for source_flags, source in commands:
            obj = Path(scratch) / (source.stem + ".o")
            cmd = [cxx, "-c", *source_flags, str(source), "-o", str(obj)]
            procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
            objects.append(str(obj))
        if cuda is not None:  # the CUDA core: plain nvcc, no TF headers
            for cmd, obj in cuda_build.cuda_compile_commands(cuda, cxx, Path(scratch), SOURCE_DIR):
                procs.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
                objects.append(obj)
        failures = []
        for cmd, proc in procs:
            output, _ = proc.communicate()
            if proc.returncode != 0:
                failures.append(f"$ {' '.join(cmd)}\n{output}")
        if failures:
            raise BuildError("compiling the AMDNN ops failed:\n" + "\n".join(failures)[-8000:])
        tmp = Path(scratch) / LIBRARY_NAME
        # No -lcudart for the GPU kernels: libtensorflow_framework (in the link flags) exports the CUDA runtime.
        cmd = [cxx, *LIBRARY_FLAGS, *target_flags, *objects, "-o", str(tmp), *tf.sysconfig.get_link_flags()]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"linking the AMDNN ops failed:\n$ {' '.join(cmd)}\n{result.stdout}{result.stderr}"[-8000:])
        os.replace(tmp, out)  # atomic: a reader sees no file or the whole library


def build(force: bool = False, cuda=None) -> BuildInfo:
    """Build the library if this cache entry lacks it (one process at a time) and return what is there. cuda: a
    cuda_build.CudaConfig for the CUDA-enabled library, None for the CPU-only one."""
    directory = library_dir(cuda)
    directory.mkdir(parents=True, exist_ok=True)
    library = directory / LIBRARY_NAME
    info_path = directory / "build.json"
    with filelock.FileLock(str(directory) + ".lock"):
        if force or not library.exists() or not info_path.exists():
            started = time.time()
            _compile(library, cuda)
            tf = _tensorflow()
            info = BuildInfo(str(library), cpu_target()[0], tf.__version__, compiler_version(compiler()),
                             source_hash(), time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                             cuda.version if cuda else None, cuda.arch_text if cuda else None)
            info_path.write_text(json.dumps(asdict(info), indent=2))
            print(f"amdnn: built the ops in {time.time() - started:.0f} s: {library}", file=sys.stderr)
    return BuildInfo(**json.loads(info_path.read_text()))


def kernels_of(library) -> dict:
    """The CPU kernels of a loaded library (tf.load_op_library's module): the level they were compiled for and the
    modes that have a fast kernel there (the rest always take the generic kernel)."""
    level, fast_modes = library.amdnn_cpu_kernels()
    return {"level": level.numpy().decode(), "fast_modes": [mode.decode() for mode in fast_modes.numpy()]}


def load_kernel_report(info: BuildInfo) -> dict:
    """kernels_of the library `info` names, loaded into this process (for `python -m ops.build --report`)."""
    tf = _tensorflow()
    return kernels_of(tf.load_op_library(info.library))
