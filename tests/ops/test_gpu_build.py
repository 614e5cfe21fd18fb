"""The CUDA-enabled TensorFlow ops library, built with this machine's nvcc and loaded into CPU TensorFlow (CI has no
GPU, so no GPU kernel runs here: the kernels behind them are proven on a GPU through the torch binding, tests/device).

One cheap target keeps CI short: PTX only (`--cuda-arch compute_90`, nvcc skips ptxas), its device code compiled
for compile time (`-Ofc max` where nvcc has it). Checked: every compute op has
its GPU kernel registered (with the HostMemory inputs it needs), every CUDA runtime symbol the library uses resolves
against TensorFlow's own libraries, the library's CPU kernels give the CPU-only library's bits, and
ops.tf_binding.library's choice of library on a machine with a GPU (faked: TF's device list) without nvcc. Skipped
without nvcc, failed under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from ops.build import cuda as cuda_build
from ops.build import tf_library
from ops.build.common import BuildError

from tests.ops.luts import lut_dir

pytestmark = pytest.mark.slow  # the module's CUDA library build: over a minute

REPO = Path(__file__).resolve().parents[2]
FAST_DEVICE_COMPILE = "--Ofast-compile"  # nvcc's option (`-Ofc`) trading device code speed for compile time
COMPUTE_OPS = {"AmdnnConv2D": {"table"}, "AmdnnConv2DBackpropInput": {"input_sizes", "table"},
               "AmdnnConv2DBackpropFilter": {"filter_sizes", "table"}, "AmdnnMatMul": {"table"},
               "AmdnnIntConv2D": set(), "AmdnnQuantise": set(),  # the integer ops: every input in device memory
               "AmdnnFiniteRange": set()}


def python(code: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cuda_cache(tmp_path_factory) -> Path:
    """A cache holding the CUDA library for compute_90 PTX, built with `python -m ops.build --cuda` (timed)."""
    nvcc = cuda_build.find_nvcc()
    if nvcc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true and no nvcc (CUDA_HOME/bin/nvcc or PATH): the GPU library build cannot be tested")
        pytest.skip("no nvcc (CUDA_HOME/bin/nvcc or PATH)")
    cache = tmp_path_factory.mktemp("cuda-cache")
    env = {**os.environ, "AMDNN_OPS_CACHE": str(cache)}
    if FAST_DEVICE_COMPILE in subprocess.run([nvcc, "--help"], capture_output=True, text=True).stdout:
        # nvcc 12.8 and later: cicc is half the build's CPU time (68 of 130 CPU s for the forward's source, nvcc
        # 13.0), `-Ofc max` takes it to ~2 s. What is checked here (registration, symbols, the CPU kernels' bits) does
        # not depend on the device code's optimisation; the kernels' machine code is the device suite's (tests/device).
        env["AMDNN_NVCC_FLAGS"] = f"{env.get('AMDNN_NVCC_FLAGS', '')} -Ofc max".strip()
    started = time.time()
    built = subprocess.run([sys.executable, "-m", "ops.build", "--cuda", "--cuda-arch", "compute_90"], cwd=REPO,
                           env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-5000:]
    print(f"\nCUDA library (compute_90 PTX) built in {time.time() - started:.0f} s")
    version = cuda_build.nvcc_version(nvcc)
    assert "cuda_arch    compute_90" in built.stdout and f"cuda         {version}" in built.stdout
    return cache


def cuda_library(cache: Path) -> Path:
    (library,) = cache.glob("*/libamdnn_ops.so")
    return library


def test_every_compute_op_has_a_gpu_kernel(cuda_cache):
    code = f"""
        import json, tensorflow as tf
        from tensorflow.python.framework import kernels
        tf.load_op_library({str(cuda_library(cuda_cache))!r})
        found = {{}}
        for op in {sorted(COMPUTE_OPS) + ["AmdnnPathCounts"]!r}:
            registered = kernels.get_registered_kernels_for_op(op).kernel
            found[op] = {{k.device_type: sorted(k.host_memory_arg) for k in registered}}
        print("KERNELS", json.dumps(found))
    """
    result = python(code)
    assert result.returncode == 0, result.stderr[-5000:]
    found = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("KERNELS"))[8:])
    for op, host_memory in COMPUTE_OPS.items():
        assert set(found[op]) == {"CPU", "GPU"}, (op, found[op])
        assert set(found[op]["GPU"]) == host_memory, (op, found[op]["GPU"])
    assert set(found["AmdnnPathCounts"]) == {"CPU"}


def test_every_cuda_symbol_resolves_against_tensorflow(cuda_cache):
    """Bound now, not on first call: the CUDA runtime entry points come from libtensorflow_framework (no -lcudart)."""
    code = f"""
        import ctypes, os, tensorflow as tf
        ctypes.CDLL({str(cuda_library(cuda_cache))!r}, mode=os.RTLD_NOW)
        print("BOUND")
    """
    result = python(code)
    assert result.returncode == 0 and "BOUND" in result.stdout, result.stderr[-5000:]


COMPUTE_SCRIPT = """
    import sys, numpy as np, tensorflow as tf
    from ops.modes.arguments import kernel_arguments
    lib = tf.load_op_library(sys.argv[1])
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    a = rng.standard_normal((5, 9)).astype(np.float32)
    b = rng.standard_normal((9, 6)).astype(np.float32)
    results = {}
    for mode in sys.argv[3:]:
        attr, table = kernel_arguments(mode)
        conv = dict(multiplier=attr, strides=[2, 1], padding="SAME", dilations=[1, 1])
        y = lib.amdnn_conv2d(x, w, table, **conv).numpy()
        results[mode + " conv2d"] = y
        results[mode + " input grad"] = lib.amdnn_conv2d_backprop_input(x.shape, w, y, table, **conv).numpy()
        results[mode + " filter grad"] = lib.amdnn_conv2d_backprop_filter(x, w.shape, y, table, **conv).numpy()
        results[mode + " matmul"] = lib.amdnn_mat_mul(a, b, table, multiplier=attr).numpy()
        results[mode + " matmul t"] = lib.amdnn_mat_mul(a.T.copy(), b.T.copy(), table, multiplier=attr,
                                                        transpose_a=True, transpose_b=True).numpy()
    np.savez(sys.argv[2], **results)
"""


def test_cpu_results_equal_the_cpu_library_bit_for_bit(cuda_cache, built_library, tmp_path):
    modes = ["am16", "acc32", "mit16", f"lut:{lut_dir() / 'MIT_7.bin'}"]
    cpu_library = built_library.library  # the CPU-only library of the session's cache
    outputs = {}
    for name, library in (("cpu", cpu_library), ("cuda", str(cuda_library(cuda_cache)))):
        outputs[name] = tmp_path / f"{name}.npz"
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(COMPUTE_SCRIPT), library, str(outputs[name]),
                                 *modes], cwd=REPO, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-5000:]
    cpu, cuda = np.load(outputs["cpu"]), np.load(outputs["cuda"])
    assert sorted(cpu.files) == sorted(cuda.files) and len(cpu.files) == 5 * len(modes)
    for key in cpu.files:
        assert np.abs(cpu[key]).sum() > 0, key  # the comparison compares something
        assert cpu[key].tobytes() == cuda[key].tobytes(), key


LOAD_WITH_A_FAKE_GPU = """
    import numpy as np, tensorflow as tf
    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
    tf.config.list_physical_devices = lambda kind=None: [gpu] if kind == "GPU" else []
    from ops.build import BuildError
    from ops.tf_binding.library import library
    try:
        lib = library()
    except BuildError as error:
        print("BUILD ERROR", error)
    else:
        print("LOADED", lib.amdnn_mat_mul(np.eye(2, dtype=np.float32), np.eye(2, dtype=np.float32),
                                          np.zeros(0, np.uint8), multiplier="acc32").numpy().tolist())
"""


def no_nvcc_env(cache: Path, bin_dir: Path) -> dict[str, str]:
    """A node without nvcc: PATH holds only the C++ compiler (the cache key needs it), CUDA_HOME is unset."""
    bin_dir.mkdir(exist_ok=True)
    cxx = os.environ.get("CXX", "g++")
    if not (bin_dir / Path(cxx).name).exists():
        (bin_dir / Path(cxx).name).symlink_to(shutil.which(cxx))
    return {"AMDNN_OPS_CACHE": str(cache), "PATH": str(bin_dir), "CUDA_HOME": ""}


def test_a_gpu_without_nvcc_or_cuda_build_is_a_clear_error(tmp_path):
    result = python(LOAD_WITH_A_FAKE_GPU, no_nvcc_env(tmp_path / "empty", tmp_path / "bin"))
    assert result.returncode == 0, result.stderr[-5000:]
    assert "BUILD ERROR TensorFlow sees a GPU (/physical_device:GPU:0) but the cache" in result.stdout
    assert "none can be built here: no nvcc: CUDA_HOME is not set and nvcc is not on PATH" in result.stdout
    assert "python -m ops.build --cuda --cuda-arch sm_70" in result.stdout
    assert not list(tmp_path.glob("**/libamdnn_ops.so"))  # no silent CPU build


def test_a_gpu_without_nvcc_loads_an_existing_cuda_build(cuda_cache, tmp_path):
    """E.g. built on the login node for PTX compute_90; this node has no nvcc (and no nvidia-smi: any build fits)."""
    result = python(LOAD_WITH_A_FAKE_GPU, no_nvcc_env(cuda_cache, tmp_path / "bin"))
    assert result.returncode == 0, result.stderr[-5000:]
    assert "LOADED [[1.0, 0.0], [0.0, 1.0]]" in result.stdout, result.stdout + result.stderr[-3000:]


def test_a_gpu_whose_nvcc_cannot_build_for_it_loads_an_existing_cuda_build(cuda_cache, tmp_path):
    """An H100 node whose nvcc predates sm_90 (faked: it lists compute_75 and compute_80) uses the compute_90 build."""
    old_nvcc = fake_nvcc(tmp_path / "cuda" / "bin", (75, 80))
    env = {**no_nvcc_env(cuda_cache, tmp_path / "bin"), "CUDA_HOME": str(old_nvcc)}
    patch = 'import ops.build.cuda as cb; cb.visible_gpu_archs = lambda: ("sm_90",)\n'
    result = python(patch + textwrap.dedent(LOAD_WITH_A_FAKE_GPU), env)
    assert result.returncode == 0, result.stderr[-5000:]
    assert "LOADED [[1.0, 0.0], [0.0, 1.0]]" in result.stdout, result.stdout + result.stderr[-3000:]


def test_existing_build_must_cover_the_gpu(monkeypatch, tmp_path):
    library = tmp_path / "a" / "libamdnn_ops.so"
    library.parent.mkdir()
    library.write_bytes(b"")
    info = {"library": str(library), "source_hash": "h", "tensorflow": "2.21.0", "target": "x86-64-v3",
            "cuda": "13.0.88", "cuda_arch": "sm_70,compute_80"}
    (library.parent / "build.json").write_text(json.dumps(info))
    for visible, fits in ((("sm_70",), True), (("sm_80",), True), (("sm_90",), True), (("sm_75",), False),
                          (("sm_70", "sm_75"), False)):
        monkeypatch.setattr(cuda_build, "visible_gpu_archs", lambda visible=visible: visible)
        assert (cuda_build.existing_build(tmp_path, "h", "2.21.0", "x86-64-v3") is not None) == fits, visible
    assert cuda_build.existing_build(tmp_path, "other sources", "2.21.0", "x86-64-v3") is None


def test_architectures_and_their_gencode_flags():
    assert cuda_build.parse_archs("sm_70, sm_80,sm_70,compute_90") == ("sm_70", "sm_80", "compute_90")
    # one front-end pass for the plain architectures, from the lowest; the architecture-specific one apart
    assert cuda_build.gencode_flags(("sm_80", "sm_90", "compute_90", "sm_90a")) == [
        "-gencode", "arch=compute_80,code=[sm_80,sm_90,compute_80]", "-gencode", "arch=compute_90a,code=sm_90a"]
    assert cuda_build.gencode_flags(("sm_90", "compute_80")) == ["-gencode", "arch=compute_80,code=[sm_90,compute_80]"]
    assert cuda_build.gencode_flags(("compute_90",)) == ["-gencode", "arch=compute_90,code=[compute_90]"]
    for bad in ("", "70", "sm70", "sm_70;sm_80", "gfx90a"):
        with pytest.raises(BuildError, match="each architecture must be sm_XY"):
            cuda_build.parse_archs(bad)


def test_cache_key_adds_cuda_version_and_architectures():
    def key(version, archs):
        return tf_library._build_key("2.21.0", "x86-64-v3", "g++ 12",
                                cuda_build.CudaConfig("nvcc", version, archs) if version else None)

    keys = {key(None, None), key("12.4.131", ("sm_70",)), key("13.0.88", ("sm_70",)),
            key("13.0.88", ("sm_70", "sm_80")), key("13.0.88", ("compute_90",))}
    assert len(keys) == 5


def fake_nvcc(bin_dir: Path, numbers: tuple[int, ...]) -> Path:
    """CUDA_HOME with a bin/nvcc that reports CUDA 13.0.88 compiling for compute_<numbers> (and compiles nothing)."""
    bin_dir.mkdir(parents=True)
    arches = "\\n".join(f"compute_{n}" for n in numbers)
    (bin_dir / "nvcc").write_text(
        f'#!/bin/sh\ncase "$1" in\n  --version) echo "Cuda compilation tools, release 13.0, V13.0.88";;\n'
        f'  --list-gpu-arch) printf "{arches}\\n";;\n  *) exit 1;;\nesac\n')
    (bin_dir / "nvcc").chmod(0o755)
    return bin_dir.parent


def test_an_architecture_nvcc_lacks_is_an_error_by_name_and_dropped_from_the_default(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CUDA_HOME", str(fake_nvcc(tmp_path / "cuda" / "bin", (75, 80, 90))))
    monkeypatch.setattr(cuda_build, "visible_gpu_archs", lambda: ())
    with pytest.raises(BuildError, match=r"nvcc 13.0.88 .* cannot compile for sm_70; it compiles for "
                                               r"compute_75, compute_80, compute_90. CUDA 13 dropped Volta"):
        cuda_build.config("sm_70,sm_80")
    assert cuda_build.config("sm_80,compute_90").archs == ("sm_80", "compute_90")
    assert cuda_build.config().archs == ("sm_80", "sm_90", "compute_90")  # DEFAULT_ARCHS less sm_70, with a warning
    assert "cannot compile for sm_70: this GPU library will not run on those GPUs" in capsys.readouterr().err
    monkeypatch.setattr(cuda_build, "visible_gpu_archs", lambda: ("sm_70",))  # a V100 node: never a useless build
    with pytest.raises(BuildError, match=r"cannot compile for sm_70 \(the visible GPU\)"):
        cuda_build.config()


def test_build_command_reports_a_bad_architecture(tmp_path):
    env = {**os.environ, "CUDA_HOME": str(fake_nvcc(tmp_path / "cuda" / "bin", (75, 90))),
           "AMDNN_OPS_CACHE": str(tmp_path / "cache")}
    for archs, message in (("sm70", "each architecture must be sm_XY"), ("sm_70", "cannot compile for sm_70")):
        result = subprocess.run([sys.executable, "-m", "ops.build", "--cuda", "--cuda-arch", archs], cwd=REPO,
                                env=env, capture_output=True, text=True)
        assert result.returncode == 2 and "error: " in result.stderr and message in result.stderr, result.stderr[-3000:]
    assert not (tmp_path / "cache").exists()
