"""The PyTorch binding's library: built on first use (torch.utils.cpp_extension) into the ops' locked cache, and
loaded.

The library holds the CPU kernels (the same GEMM core as the TensorFlow ops) and, where torch has CUDA and nvcc is
found (CUDA_HOME or PATH), the CUDA core for the GPUs of TORCH_CUDA_ARCH_LIST (default: the visible GPUs'). The
cache key holds the sources, torch's version, its CUDA version, the architectures, the CPU target and the
compiler, so nodes of a cluster that share AMDNN_OPS_CACHE never load a build that is not theirs. Loading registers
torch.ops.amdnn.* (the schemas live in ops/cc/torch_binding.cc).

    python -m ops.build --torch        build now and report what was built (`python -m ops.torch_build` too)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass

import filelock

from ops.build.common import (CORE_SOURCES, CUDA_SOURCES, SOURCE_DIR, BuildError, cache_root, compiler,
                              compiler_version, cpu_target, cxx_flags, nvcc_flags, source_hash)

# The torch binding's source (schemas, CPU and CUDA registrations) on top of the core.
TORCH_SOURCES = ("torch_binding.cc", *CORE_SOURCES)
# -fopenmp: at::parallel_for (torch_binding.cc's torch_parallel_for, every CPU kernel's thread split) is an OpenMP
# region compiled into the caller; without the flag it runs on one thread while torch's own ops use every core (an
# int8 conv 4x4x512 forward: 390-450 ms on 1 thread, 226 ms with the flag on 2, bit for bit the same). Its GOMP
# symbols resolve to the OpenMP runtime torch has already loaded.
CXX_FLAGS = cxx_flags() + ["-fopenmp"]

_lock = threading.Lock()
_loaded: "TorchBuildInfo | None" = None


@dataclass(frozen=True)
class TorchBuildInfo:
    """What was built and loaded."""

    library: str
    target: str
    torch: str
    cuda: str | None  # torch's CUDA version when the CUDA kernels are in the library, else None
    cuda_arch: str | None
    compiler: str
    source_hash: str
    built_at: str


def _torch():
    try:
        import torch  # here, not at the top: the TF build and `import ops` need no torch
    except ImportError as error:
        raise BuildError("the PyTorch binding needs torch: pip install 'amdnn[torch]' (or torch>=2.11)") from error
    return torch


def cuda_wanted() -> bool:
    """Whether to build the CUDA kernels: torch has CUDA, a GPU is visible or AMDNN_TORCH_CUDA=1, and nvcc exists."""
    torch = _torch()
    from torch.utils import cpp_extension  # torch only when the binding is built: the TF build loads none

    forced = os.environ.get("AMDNN_TORCH_CUDA")
    if forced is not None:
        if forced == "1" and (torch.version.cuda is None or cpp_extension.CUDA_HOME is None):
            raise BuildError("AMDNN_TORCH_CUDA=1 but this torch has no CUDA or no CUDA toolkit was found (set CUDA_HOME "
                             "or put nvcc on PATH, e.g. `module load cuda`)")
        return forced == "1"
    return torch.version.cuda is not None and torch.cuda.is_available() and cpp_extension.CUDA_HOME is not None


def cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST, or the visible GPUs' compute capabilities (e.g. "9.0")."""
    torch = _torch()
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    capabilities = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
    return ";".join(f"{major}.{minor}" for major, minor in capabilities) or "7.0;8.0;9.0+PTX"


def _key(torch_version: str, cuda: str | None, arch: str | None, target: str, cxx_version: str) -> str:
    text = json.dumps([source_hash(), torch_version, cuda, arch, target, cxx_version, CXX_FLAGS, nvcc_flags()])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def load() -> TorchBuildInfo:
    """Build (once per cache entry, one process at a time) and load the binding into this process."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        torch = _torch()
        from torch.utils import cpp_extension  # as in cuda_wanted

        with_cuda = cuda_wanted()
        arch = cuda_arch_list() if with_cuda else None
        target, target_flags = cpu_target()
        cxx = compiler()
        key = _key(torch.__version__, torch.version.cuda if with_cuda else None, arch, target, compiler_version(cxx))
        directory = cache_root() / f"torch-{target}-{'cuda' if with_cuda else 'cpu'}-{key}"
        directory.mkdir(parents=True, exist_ok=True)
        sources = [str(SOURCE_DIR / name) for name in TORCH_SOURCES + (CUDA_SOURCES if with_cuda else ())]
        started = time.time()
        if arch:
            os.environ["TORCH_CUDA_ARCH_LIST"] = arch  # what cpp_extension compiles the .cu files for
        with filelock.FileLock(str(directory) + ".lock"):
            try:
                cpp_extension.load(
                    name=f"amdnn_torch_{key}", sources=sources, build_directory=str(directory),
                    extra_cflags=CXX_FLAGS + target_flags + (["-DAMDNN_WITH_CUDA"] if with_cuda else []),
                    extra_cuda_cflags=nvcc_flags(), extra_include_paths=[str(SOURCE_DIR)], with_cuda=with_cuda,
                    is_python_module=False, verbose=os.environ.get("AMDNN_BUILD_VERBOSE") == "1")
            except (RuntimeError, OSError, ImportError) as error:
                raise BuildError(f"building the PyTorch binding of the AMDNN ops failed in {directory}: {error}. "
                                 "Set AMDNN_BUILD_VERBOSE=1 for the compiler's output.") from error
        library = next(iter(sorted(directory.glob("*.so"))), directory)
        info_path = directory / "build.json"
        if not info_path.exists():
            info = TorchBuildInfo(str(library), target, torch.__version__, torch.version.cuda if with_cuda else None,
                                  arch, compiler_version(cxx), source_hash(), time.strftime("%Y-%m-%d %H:%M:%S %Z"))
            info_path.write_text(json.dumps(asdict(info), indent=2))
            print(f"amdnn: built the PyTorch ops in {time.time() - started:.0f} s: {library}", file=sys.stderr)
        _loaded = TorchBuildInfo(**json.loads(info_path.read_text()))
        return _loaded


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description="Build the AMDNN PyTorch ops (CPU, and CUDA where available).").parse_args(argv)
    try:
        info = load()
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print("\n".join(f"{key:12s} {value}" for key, value in asdict(info).items()))
    return 0


if __name__ == "__main__":  # also `python -m ops.torch_build` and `python -m ops.build --torch`
    sys.exit(main())
