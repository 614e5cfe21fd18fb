"""`python -m ops.selftest` where there is no GPU (CI, this machine): it refuses clearly, and its checks catch a GPU
that differs from the CPU. The real GPU run is tests/device (bash tests/device/run_on_gpu.sh runs it there).

The checks run here over a stand-in whose "GPU" is the torch binding's CPU kernels: once faithful (everything must
pass, every mode and table listed) and once with one output bit or one gradient value changed on the "GPU" side
(the self-test must fail and say where).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the test extra installs torch (pip install -e .[test])")

from ops import selftest, selftest_frameworks  # noqa: E402
from ops.modes.multipliers import names  # noqa: E402
from ops.selftest_frameworks import TorchFramework  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class CpuAsGpu(TorchFramework):
    """The torch framework with the CPU kernels standing in for the GPU's (no CUDA here)."""

    corrupt = None  # None, "product", "gradient", "code" or "range"

    def __init__(self):
        from ops import torch_ops

        self.torch, self.ops = torch, torch_ops

    def gpu_name(self) -> str:
        return "CPU standing in for a GPU"

    def _tensor(self, array, device, grad=False):
        return super()._tensor(array, "cpu", grad)

    def matmul(self, a, b, mode, device):
        out = super().matmul(a, b, mode, device)
        if device == "gpu" and self.corrupt == "product" and mode == "am16":
            out.view(np.uint32)[3, 5] ^= 1
        return out

    def matmul_grads(self, a, b, dc, mode, device):
        c, da, db = super().matmul_grads(a, b, dc, mode, device)
        if device == "gpu" and self.corrupt == "gradient" and mode == "mit32":
            db = db * np.float32(1.001)
        return c, da, db

    def errors_reach_python(self, device):  # noqa: ARG002 - the frameworks' signature
        return super().errors_reach_python("cpu")  # the CPU dispatch's exceptions take the same way out

    def quantise(self, x, scale, zero, qmin, qmax, device):
        codes, mask = super().quantise(x, scale, zero, qmin, qmax, device)
        if device == "gpu" and self.corrupt == "code" and (qmin, scale.size) == (0, 96):
            codes[10, 20] ^= 1
        return codes, mask

    def finite_range(self, x, per_channel, device):
        lo, hi, finite = super().finite_range(x, per_channel, device)
        if device == "gpu" and self.corrupt == "range" and per_channel:
            hi[7] = np.nextafter(hi[7], np.float32(np.inf))
        return lo, hi, finite


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setitem(selftest.FRAMEWORKS, "torch", CpuAsGpu)
    return CpuAsGpu


def test_without_a_gpu_it_says_so_and_exits_2():
    result = subprocess.run([sys.executable, "-m", "ops.selftest", "--framework", "torch", "--no-speed"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result.stderr
    assert "cannot test the GPU kernels through torch: torch sees no CUDA GPU" in result.stderr


def test_faithful_kernels_pass_every_mode(stand_in, capsys):
    assert selftest.main(["--framework", "torch", "--no-speed", "--pairs-per-side", "40"]) == 0
    out = capsys.readouterr().out
    for mode in names(include_native=False) + ["lut:am16_7.bin", "lut:mit16_7.bin", "lut:acc16_7.bin"]:
        assert f"{mode:16s} products bit-exact, layers max relative error 0.0e+00: ok" in out
    assert "quantiser        codes, masks and ranges GPU == CPU: bit-exact: ok" in out
    assert "errors           a refused op call raises in Python: ok" in out
    assert out.rstrip().splitlines()[-1].startswith("ops.selftest: passed")


def test_one_differing_product_bit_fails_and_is_named(stand_in, capsys, monkeypatch):
    monkeypatch.setattr(CpuAsGpu, "corrupt", "product")
    assert selftest.main(["--framework", "torch", "--no-speed", "--pairs-per-side", "40"]) == 1
    out = capsys.readouterr().out
    assert "am16             products DIFFER" in out
    assert "am16: 1 of" in out and "products differ; first 0x" in out
    assert "ops.selftest: FAILED, 1 mismatches" in out


def test_a_gradient_off_by_1e_3_fails(stand_in, capsys, monkeypatch):
    monkeypatch.setattr(CpuAsGpu, "corrupt", "gradient")
    assert selftest.main(["--framework", "torch", "--no-speed", "--pairs-per-side", "40"]) == 1
    out = capsys.readouterr().out
    assert "mit32: matmul 96x200x72 weight gradient: relative error 1.00e-03 > 1e-05" in out


@pytest.mark.parametrize("corrupt,named", [
    ("code", "quantiser: codes [0, 255], 96 scale(s): 1 of 6144 codes and 0 masks differ"),
    ("range", "quantiser: ranges, 96 channel(s): hi differs")])
def test_one_differing_quantiser_code_or_range_bound_fails_and_is_named(stand_in, capsys, monkeypatch, corrupt, named):
    monkeypatch.setattr(CpuAsGpu, "corrupt", corrupt)
    assert selftest.main(["--framework", "torch", "--no-speed", "--pairs-per-side", "4"]) == 1
    out = capsys.readouterr().out
    assert "quantiser        codes, masks and ranges GPU == CPU: MISMATCH" in out
    assert named in out
    assert "ops.selftest: FAILED, 1 mismatches" in out


def test_a_binding_whose_errors_end_the_process_fails_and_says_how_to_rebuild(stand_in, capsys, monkeypatch):
    """What a binding built by a toolchain whose exceptions cannot unwind into torch does (SIGSEGV at the refused
    call, seen on a GPU machine), played by the probe's child ending itself so."""
    monkeypatch.setattr(selftest_frameworks, "ERROR_PROBE",
                        "import os, signal\nprint('calling', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)\n"
                        "# {device}")
    assert selftest.main(["--framework", "torch", "--no-speed", "--pairs-per-side", "4"]) == 1
    out = capsys.readouterr().out
    assert "errors           a refused op call raises in Python: NO" in out
    assert "a refused op call did not raise in Python (the child ended by signal 11: 'calling')" in out
    assert "CXX=/usr/bin/g++ python -m ops.build --torch" in out
    assert "ops.selftest: FAILED, 1 mismatches" in out
