"""What every build of the compiled ops shares: the core's sources, the bit-exactness flags, the CPU target, the
compiler, the cache folder and the source hash in every cache key.

The TensorFlow library (ops/build/tf_library.py, with its CUDA part ops/build/cuda.py) and the PyTorch binding
(ops/build/torch_library.py) compile the same framework-free core; each adds only its own binding sources. Neither
framework is imported here.

AMDNN_OPS_CACHE sets the cache directory (default ~/.cache/amdnn/ops); CXX the compiler (default g++);
AMDNN_OPS_TARGET a lower target than the CPU's best (one of X86_TARGETS' names); AMDNN_NVCC_FLAGS extra nvcc flags.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[1] / "cc"
# The framework-free CPU core, compiled into every library.
CORE_SOURCES = ("conv_cpu.cc", "gemm_cpu.cc", "integer_conv_cpu.cc", "integer_quantise_cpu.cc",
                "multiplier_setup.cc")
# The framework-free CUDA core, compiled by nvcc into every GPU library.
CUDA_SOURCES = ("gemm_cuda.cu", "gemm_cuda_conv.cu", "gemm_cuda_input_grad.cu", "gemm_cuda_filter_grad.cu",
                "gemm_cuda_streams.cu", "gemm_cuda_layouts.cu", "integer_conv_cuda.cu")

# Bit-exactness needs IEEE arithmetic as written: no contraction of a*b+c into an FMA, no fast math.
BIT_EXACT_FLAGS = ("-ffp-contract=off", "-fno-fast-math")
NVCC_BIT_EXACT_FLAGS = ("-fmad=false",)
NVCC_FLAGS = ["-O3", *NVCC_BIT_EXACT_FLAGS, "--expt-relaxed-constexpr", "-std=c++17"]

# x86-64 levels, best first: (target name, the /proc/cpuinfo flags it needs, compiler flags).
X86_TARGETS = (
    ("x86-64-v4-vbmi", {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512vbmi"},
     ["-march=x86-64-v4", "-mavx512vbmi"]),
    ("x86-64-v4", {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"}, ["-march=x86-64-v4"]),
    ("x86-64-v3", {"avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"}, ["-march=x86-64-v3"]),
    ("x86-64-v2", {"sse4_2", "popcnt", "ssse3"}, ["-march=x86-64-v2"]),
    ("x86-64", set(), ["-march=x86-64"]),
)


class BuildError(RuntimeError):
    """The ops could not be built or loaded; the message says why and what to do."""


def cxx_flags(shared_object: bool = False) -> list[str]:
    """The C++ compiler's flags for the core: -O3, BIT_EXACT_FLAGS, generic tuning (the target's -march comes from
    cpu_target). shared_object adds -shared -fPIC, for the TF library that is linked here by hand (torch's
    cpp_extension adds its own); the order is the one the cache keys were made with."""
    return ["-O3", *(["-shared", "-fPIC"] if shared_object else []), *BIT_EXACT_FLAGS, "-mtune=generic"]


def nvcc_flags() -> list[str]:
    """NVCC_FLAGS plus AMDNN_NVCC_FLAGS (space-separated; e.g. -lineinfo for a profiler, or the kernels' tuning knobs
    -DAMDNN_GPU_BK=16 -DAMDNN_GPU_MIN_BLOCKS=2 when measuring them)."""
    return NVCC_FLAGS + os.environ.get("AMDNN_NVCC_FLAGS", "").split()


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_target() -> tuple[str, list[str]]:
    """The best target the running CPU supports (or AMDNN_OPS_TARGET, e.g. to build for an older partition), and
    its compiler flags."""
    if platform.machine() not in ("x86_64", "AMD64"):
        # Other architectures: the generic kernel at the baseline of the architecture, keyed by machine name.
        return platform.machine(), []
    flags = cpu_flags()
    forced = os.environ.get("AMDNN_OPS_TARGET")
    if forced:
        match = next((target for target in X86_TARGETS if target[0] == forced), None)
        if match is None:
            raise BuildError(f"AMDNN_OPS_TARGET={forced!r} is not a target; valid: "
                             f"{', '.join(target[0] for target in X86_TARGETS)}")
        if not match[1] <= flags:
            raise BuildError(f"AMDNN_OPS_TARGET={forced} needs CPU features this CPU lacks: "
                             f"{', '.join(sorted(match[1] - flags))}")
        return match[0], match[2]
    for name, needed, compile_flags in X86_TARGETS:
        if needed <= flags:
            return name, compile_flags
    return X86_TARGETS[-1][0], X86_TARGETS[-1][2]


def cache_root() -> Path:
    return Path(os.environ.get("AMDNN_OPS_CACHE", Path.home() / ".cache" / "amdnn" / "ops"))


def compiler() -> str:
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        raise BuildError(f"no C++ compiler: '{name}' is not on PATH. Install one (Debian: apt-get install g++) or set "
                         "CXX; or build on a node that has one with `python -m ops.build` into a shared "
                         "AMDNN_OPS_CACHE.")
    return path


@functools.lru_cache(maxsize=None)  # a subprocess; asked up to three times on a first use
def compiler_version(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.stdout else cxx


def source_hash() -> str:
    """A hash of every kernel source (C++, CUDA and their headers) and of which of them the core compiles: part of
    every cache key."""
    digest = hashlib.sha256(" ".join((*CORE_SOURCES, *CUDA_SOURCES)).encode())
    for path in sorted(SOURCE_DIR.glob("*")):
        if path.suffix in (".h", ".cc", ".cu", ".cuh"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
