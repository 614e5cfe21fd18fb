"""Build the compiled ops on first use, into a cache shared safely by processes, users' nodes and CPU generations.

The library is compiled against the installed TensorFlow (flags from tf.sysconfig) for one CPU target: the best
x86-64 micro-architecture level the running CPU supports (x86-64-v4 with or without AVX-512 VBMI, v3, v2, or the
baseline), never `-march=native`, so a cache directory shared by nodes of different generations never hands a node
an instruction it lacks: the target is part of the cache key, next to a hash of the sources, the TensorFlow version
and the compiler. When a job array starts at once, one process builds under a file lock and the others wait and
load the same file.

    python -m ops.build            build now (e.g. on a login node) and report what was built, where, for which TF
    python -m ops.build --info     report only; build nothing
    python -m ops.build --report   build if needed, load, and report also the kernels' instruction-set level and
                                   which modes have a fast kernel there (the others run the generic kernel)
    python -m ops.build --cuda [--cuda-arch sm_70,sm_80,sm_90]
                                   the CUDA-enabled library: the CPU kernels and the GPU kernels in one library (an
                                   op is registered once per process); nvcc, architectures: ops/cuda_build.py. Its
                                   cache key adds the CUDA version and the architectures.

AMDNN_OPS_CACHE sets the cache directory (default ~/.cache/amdnn/ops); CXX the compiler (default g++);
AMDNN_OPS_TARGET a lower target than the CPU's best (one of X86_TARGETS' names).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import filelock

SOURCE_DIR = Path(__file__).resolve().parent / "cc"
CPU_SOURCES = ("ops_interface.cc", "kernels_cpu.cc", "conv_cpu.cc", "gemm_cpu.cc", "multiplier_setup.cc")
LIBRARY_NAME = "libamdnn_ops.so"
SUPPORTED_TF = "2.21"  # the TF minor the ops are written and tested against (pyproject pins the same)

# x86-64 levels, best first: (target name, the /proc/cpuinfo flags it needs, compiler flags).
X86_TARGETS = (
    ("x86-64-v4-vbmi", {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd", "avx512vbmi"},
     ["-march=x86-64-v4", "-mavx512vbmi"]),
    ("x86-64-v4", {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"}, ["-march=x86-64-v4"]),
    ("x86-64-v3", {"avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"}, ["-march=x86-64-v3"]),
    ("x86-64-v2", {"sse4_2", "popcnt", "ssse3"}, ["-march=x86-64-v2"]),
    ("x86-64", set(), ["-march=x86-64"]),
)
# Bit-exactness needs IEEE arithmetic as written: no contraction of a*b+c into an FMA, no fast-math.
COMMON_FLAGS = ["-O3", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-mtune=generic"]


class BuildError(RuntimeError):
    """The ops could not be built or loaded; the message says why and what to do."""


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
def _compiler_version(cxx: str) -> str:
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.stdout else cxx


def _tensorflow():
    import tensorflow as tf

    if not tf.__version__.startswith(SUPPORTED_TF + "."):
        raise BuildError(f"TensorFlow {tf.__version__} is installed; the ops are built for TensorFlow {SUPPORTED_TF}.x "
                         f"(pip install 'tensorflow=={SUPPORTED_TF}.*').")
    return tf


def source_hash() -> str:
    """A hash of every kernel source (C++, CUDA and their headers): part of every cache key."""
    digest = hashlib.sha256()
    for path in sorted(SOURCE_DIR.glob("*")):
        if path.suffix in (".h", ".cc", ".cu", ".cuh"):
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _build_key(tf_version: str, target: str, cxx_version: str, cuda=None) -> str:
    parts = [source_hash(), tf_version, target, cxx_version, COMMON_FLAGS]
    if cuda is not None:  # a CPU-only key stays what it was
        from ops.cuda_build import nvcc_flags

        parts += [cuda.version, list(cuda.archs), nvcc_flags()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:20]


def library_dir(cuda=None) -> Path:
    """The cache folder of the library for this source, TF, CPU target and compiler, and for `cuda` (a
    cuda_build.CudaConfig) its CUDA version and architectures (whether built or not)."""
    tf = _tensorflow()
    cxx = compiler()
    target, _ = cpu_target()
    key = _build_key(tf.__version__, target, _compiler_version(cxx), cuda)
    gpu = f"cuda{cuda.version}-{cuda.arch_text.replace(',', '+')}-" if cuda is not None else ""
    return cache_root() / f"{target}-tf{tf.__version__}-{gpu}{key}"


def _compile(out: Path, cuda=None) -> None:
    tf = _tensorflow()
    cxx = compiler()
    _, target_flags = cpu_target()
    flags = [*COMMON_FLAGS, *target_flags, *tf.sysconfig.get_compile_flags()]
    commands = [(flags, SOURCE_DIR / name) for name in CPU_SOURCES]
    if cuda is not None:
        from ops import cuda_build

        commands.append(([*flags, *cuda_build.gpu_kernel_flags(tf.sysconfig.get_include())],
                         SOURCE_DIR / cuda_build.GPU_KERNEL_SOURCE))
    objects = []
    with tempfile.TemporaryDirectory(dir=out.parent) as scratch:
        # One compiler per source, in parallel: TF's headers make each file take ~20 s.
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
        cmd = [cxx, *COMMON_FLAGS, *target_flags, *objects, "-o", str(tmp), *tf.sysconfig.get_link_flags()]
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
            info = BuildInfo(str(library), cpu_target()[0], tf.__version__, _compiler_version(compiler()),
                             source_hash(), time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                             cuda.version if cuda else None, cuda.arch_text if cuda else None)
            info_path.write_text(json.dumps(asdict(info), indent=2))
            print(f"amdnn: built the ops in {time.time() - started:.0f} s: {library}", file=sys.stderr)
    return BuildInfo(**json.loads(info_path.read_text()))


def report(info: BuildInfo) -> str:
    return "\n".join(f"{key:12s} {value}" for key, value in asdict(info).items())


def kernel_report() -> str:
    """The loaded library's CPU kernel level and the modes that have a fast kernel there."""
    from ops import multipliers
    from ops.kernel_paths import cpu_kernels

    kernels = cpu_kernels()
    modes = [*multipliers.names(include_native=False), "table"]  # the kernels' modes; "table" runs lut:<file>
    label = {"table": "lut"}
    fast = [label.get(mode, mode) for mode in modes if mode in kernels["fast_modes"]]
    generic = [label.get(mode, mode) for mode in modes if mode not in kernels["fast_modes"]]
    return "\n".join([f"{'cpu kernels':12s} {kernels['level']}",
                      f"{'fast modes':12s} {' '.join(fast) or 'none'}",
                      f"{'generic only':12s} {' '.join(generic) or 'none'}"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the AMDNN TensorFlow ops for this CPU and TensorFlow.")
    parser.add_argument("--info", action="store_true", help="report the cache entry for this machine; build nothing")
    parser.add_argument("--force", action="store_true", help="rebuild even if the cache has the library")
    parser.add_argument("--report", action="store_true",
                        help="also load the library and report its kernels' level and fast modes")
    parser.add_argument("--cuda", action="store_true",
                        help="the CUDA-enabled library (CPU and GPU kernels), with nvcc from CUDA_HOME or PATH")
    parser.add_argument("--cuda-arch", metavar="ARCHS",
                        help="with --cuda: comma-separated sm_XY (machine code) and compute_XY (PTX) targets; default: "
                             "the visible GPU's, else sm_70,sm_80,sm_90,compute_90")
    args = parser.parse_args(argv)
    if args.cuda_arch and not args.cuda:
        parser.error("--cuda-arch needs --cuda")
    try:
        cuda = None
        if args.cuda:
            from ops import cuda_build

            cuda = cuda_build.config(args.cuda_arch)
        if args.info:
            directory = library_dir(cuda)
            info_path = directory / "build.json"
            if not info_path.exists():
                print(f"not built yet for this machine: {directory} (run `python -m ops.build"
                      f"{' --cuda' if cuda else ''}`)")
                return 1
            print(report(BuildInfo(**json.loads(info_path.read_text()))))
            return 0
        print(report(build(force=args.force, cuda=cuda)))
        if args.report:
            print(kernel_report())
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    # Run ops.build's own main, not this __main__ copy's: ops.cuda_build raises ops.build.BuildError, which a copy's
    # `except BuildError` would not catch.
    from ops.build import main as _main

    sys.exit(_main())
