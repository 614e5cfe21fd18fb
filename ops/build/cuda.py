"""The CUDA part of the TensorFlow library's build (`python -m ops.build --cuda`): nvcc, the GPU architectures, the
compile commands of the CUDA core and of the TF GPU kernels, and finding an existing CUDA build on a node without
nvcc.

nvcc is found through CUDA_HOME (its bin/nvcc) or PATH (a cluster's `module load cuda`). Architectures are names as
nvcc spells them: `sm_XY` compiles machine code for compute capability X.Y, `compute_XY` embeds PTX that the driver
compiles for X.Y and newer GPUs (nvcc skips ptxas, the cheapest build); one front-end pass serves them all
(gencode_flags). Default: the visible GPUs' (nvidia-smi), else DEFAULT_ARCHS less those this nvcc cannot compile for
(CUDA 13 dropped Volta: a V100, sm_70, needs a CUDA 12 nvcc), with a warning. An architecture asked for by name, or a
visible GPU's, that this nvcc cannot compile for is an error.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ops.build.common import CUDA_SOURCES, BuildError, nvcc_flags

# V100, A100, H100/H200 machine code, plus PTX for newer GPUs.
DEFAULT_ARCHS = ("sm_70", "sm_80", "sm_90", "compute_90")
GPU_KERNEL_SOURCE = "kernels_gpu.cc"
_ARCH = re.compile(r"^(sm|compute)_(\d+)([af]?)$")
HOW_TO_BUILD = ("build it where nvcc exists, into the AMDNN_OPS_CACHE this node reads, for this GPU's architecture: "
                "e.g. on the login node `module load cuda/12.x; python -m ops.build --cuda --cuda-arch sm_70` (V100, "
                "which needs CUDA 12; sm_80 A100, sm_90 H100), or put nvcc on PATH / set CUDA_HOME here")


@dataclass(frozen=True)
class CudaConfig:
    """What a CUDA build is for: the nvcc that compiles it, its version, and the architectures."""

    nvcc: str
    version: str  # e.g. "13.0.88"
    archs: tuple[str, ...]

    @property
    def arch_text(self) -> str:
        return ",".join(self.archs)


def find_nvcc() -> str | None:
    """CUDA_HOME/bin/nvcc if CUDA_HOME is set and has one, else nvcc on PATH, else None."""
    home = os.environ.get("CUDA_HOME")
    if home and (Path(home) / "bin" / "nvcc").is_file():
        return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str:
    """The release of an nvcc, e.g. "13.0.88" (from `nvcc --version`'s "... release 13.0, V13.0.88")."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True)
    match = re.search(r"release [\d.]+, V([\d.]+)", out.stdout)
    if out.returncode != 0 or match is None:
        raise BuildError(f"{nvcc} --version did not report a CUDA release:\n{out.stdout}{out.stderr}")
    return match.group(1)


@functools.lru_cache(maxsize=None)
def supported_numbers(nvcc: str) -> frozenset[int] | None:
    """The XY of every compute_XY this nvcc compiles for (`nvcc --list-gpu-arch`), None if it cannot say."""
    out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True)
    numbers = {int(match) for match in re.findall(r"compute_(\d+)", out.stdout)}
    return frozenset(numbers) if out.returncode == 0 and numbers else None


def parse_archs(text: str) -> tuple[str, ...]:
    """"sm_70,sm_80,compute_90" -> ("sm_70", "sm_80", "compute_90"), checked, duplicates dropped, order kept."""
    archs = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    bad = [arch for arch in archs if not _ARCH.match(arch)]
    if bad or not archs:
        raise BuildError(f"--cuda-arch {text!r}: each architecture must be sm_XY (machine code for compute capability "
                         f"X.Y) or compute_XY (PTX), comma-separated, e.g. sm_70,sm_80,sm_90,compute_90")
    return archs


def visible_gpu_archs() -> tuple[str, ...]:
    """sm_XY of each visible GPU (nvidia-smi --query-gpu=compute_cap), or () when nvidia-smi is missing or sees none."""
    if shutil.which("nvidia-smi") is None:
        return ()
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    caps = [line.strip() for line in out.stdout.splitlines() if re.fullmatch(r"\d+\.\d+", line.strip())]
    return tuple(dict.fromkeys("sm_" + cap.replace(".", "") for cap in caps)) if out.returncode == 0 else ()


def config(archs: str | None = None) -> CudaConfig:
    """The CUDA build to make: nvcc (or a BuildError saying how to get one) and the architectures."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise BuildError("no nvcc: CUDA_HOME is " + (f"{os.environ['CUDA_HOME']!r} (no bin/nvcc there)"
                                                     if os.environ.get("CUDA_HOME") else "not set")
                         + " and nvcc is not on PATH. To build the GPU ops, " + HOW_TO_BUILD + ".")
    version = nvcc_version(nvcc)
    supported = supported_numbers(nvcc)
    chosen = parse_archs(archs) if archs else (visible_gpu_archs() or DEFAULT_ARCHS)
    unsupported = [arch for arch in chosen if supported is not None and _number(arch) not in supported]
    if unsupported and (archs or chosen != DEFAULT_ARCHS):
        raise BuildError(f"nvcc {version} ({nvcc}) cannot compile for {', '.join(unsupported)}"
                         f"{' (the visible GPU)' if not archs else ''}; it compiles for compute_"
                         f"{', compute_'.join(str(n) for n in sorted(supported))}. CUDA 13 dropped Volta: a V100 "
                         "(sm_70) needs a CUDA 12 nvcc, e.g. `module load cuda/12.x` or CUDA_HOME=<a CUDA 12 toolkit>.")
    if unsupported:
        chosen = tuple(arch for arch in chosen if arch not in unsupported)
        print(f"amdnn: warning: nvcc {version} cannot compile for {', '.join(unsupported)}: this GPU library will not "
              f"run on those GPUs (V100, sm_70, needs a CUDA 12 nvcc); building for {','.join(chosen)}",
              file=sys.stderr)
    return CudaConfig(nvcc, version, chosen)


def _number(arch: str) -> int:
    return int(_ARCH.match(arch).group(2))


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """nvcc's -gencode flags for `archs`. The plain architectures share one front-end pass (cicc, ~22 s of a source's
    ~35 s per architecture on the 2-core build machine): every sm_XY's machine code, and the PTX where a compute_XY
    is asked for, come from the PTX of the lowest of them, which runs on every GPU the asked-for PTX runs on. The
    kernels use nothing newer than that PTX offers but programmatic dependent launch (9.0+), which code from older
    PTX lacks: there they launch plain (gemm_cuda_launch.cuh; 0.2-0.8 % slower on an H200). Architecture-specific
    ones (sm_90a) keep their own pass."""
    parsed = [_ARCH.match(arch).groups() for arch in archs]  # (kind, number, suffix)
    plain = [(kind, number) for kind, number, suffix in parsed if not suffix]
    flags = []
    if plain:
        lowest = min(int(number) for _, number in plain)
        codes = [f"sm_{number}" for kind, number in plain if kind == "sm"]
        if any(kind == "compute" for kind, _ in plain):
            codes.append(f"compute_{lowest}")
        flags += ["-gencode", f"arch=compute_{lowest},code=[{','.join(codes)}]"]
    for kind, number, suffix in parsed:
        if suffix:
            flags += ["-gencode", f"arch=compute_{number}{suffix},code={kind}_{number}{suffix}"]
    return flags


def cuda_compile_commands(cuda: CudaConfig, cxx: str, scratch: Path, source_dir: Path) -> list[tuple[list[str], str]]:
    """(nvcc command, object) for each CUDA core source: framework-free, no TF headers."""
    commands = []
    for name in CUDA_SOURCES:
        obj = str(scratch / (Path(name).stem + ".o"))
        commands.append(([cuda.nvcc, "-c", *nvcc_flags(), "-ccbin", cxx, "-Xcompiler", "-fPIC",
                          *gencode_flags(cuda.archs), str(source_dir / name), "-o", obj], obj))
    return commands


def gpu_kernel_flags(tf_include: str) -> list[str]:
    """g++ flags of kernels_gpu.cc on top of the CPU sources' (TF's GPU device and the CUDA headers TF ships)."""
    return ["-DGOOGLE_CUDA=1", "-DEIGEN_USE_GPU", f"-I{tf_include}/third_party/gpus/cuda/include"]


def _covers(archs: list[str], capability: str | None) -> bool:
    """Whether a build for `archs` runs on a GPU of sm_XY `capability` (machine code for it, or PTX not newer)."""
    if capability is None:
        return True
    number = int(capability.split("_")[1])
    for arch in archs:
        kind, arch_number, _ = _ARCH.match(arch).groups()
        if (kind == "sm" and arch == capability) or (kind == "compute" and int(arch_number) <= number):
            return True
    return False


def cached_builds(root: Path, source: str):
    """(build.json path, its contents) of every finished CUDA build in the cache `root` for these sources."""
    for info_path in root.glob("*/build.json"):
        try:
            info = json.loads(info_path.read_text())
        except (OSError, ValueError):
            continue
        if info.get("cuda_arch") and info.get("source_hash") == source:
            yield info_path, info


def existing_build(root: Path, source: str, tensorflow: str, target: str) -> Path | None:
    """The build.json of a finished CUDA build in the cache for these sources, TF and CPU target whose architectures
    cover every visible GPU (any nvcc version: for a node without nvcc), newest first; None if there is none."""
    capabilities = visible_gpu_archs() or (None,)
    found = [info_path for info_path, info in cached_builds(root, source)
             if info.get("tensorflow") == tensorflow and info.get("target") == target
             and Path(info.get("library", "")).exists()
             and all(_covers(info["cuda_arch"].split(","), cap) for cap in capabilities)]
    return max(found, key=lambda path: path.stat().st_mtime) if found else None
