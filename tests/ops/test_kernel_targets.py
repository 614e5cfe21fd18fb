"""Every CPU level the build can choose computes the same bits, through its fast kernels where it has them: each
level this CPU can run is forced (AMDNN_OPS_TARGET) in a subprocess that builds its library (into the shared ops
cache, so only a first run compiles) and runs tests/ops/level_check.py: single products of every mode against the numpy
reference, then every op of every mode on layer-sized operands, once in the fast kernels' range and once with an
underflowing value that sends some blocks to the generic kernel. The outputs must be the same bits at every level:
the generic level (x86-64-v2, no vector layer) sums the scalar definitions of multiplier.h in the same order.

CI machines have AVX-512 with VBMI, so this is where the x86-64-v3 (AVX2) and x86-64-v4 (AVX-512 without VBMI)
kernels run at all; on a CPU that lacks a level, that level is skipped with the flags it lacks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ops.build import common
from ops.modes.operands import same_bits

from tests.ops.kernels import kernel_modes

REPO = Path(__file__).resolve().parents[2]
GENERIC_LEVEL = "x86-64-v2"  # no vector layer: the generic kernel only (the baseline x86-64 builds the same code)
FAST_LEVELS = [name for name, _, _ in common.X86_TARGETS if name.startswith(("x86-64-v4", "x86-64-v3"))]


def run_level(level: str, out: Path) -> tuple[dict, dict]:
    needed = next(flags for name, flags, _ in common.X86_TARGETS if name == level)
    if not needed <= common.cpu_flags():
        pytest.skip(f"this CPU cannot run {level} code (lacks {sorted(needed - common.cpu_flags())})")
    env = {**os.environ, "AMDNN_OPS_TARGET": level}
    result = subprocess.run([sys.executable, "-m", "tests.ops.level_check", level, str(out)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.startswith(("KERNELS", "COUNTS")))
    return json.loads(lines["KERNELS"]), json.loads(lines["COUNTS"])


@pytest.fixture(scope="module")
def generic_outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("generic") / "outputs.npz"
    kernels, counts = run_level(GENERIC_LEVEL, out)
    assert kernels["fast_modes"] == [], kernels
    assert all(count["fast_products"] == 0 for count in counts.values()), counts
    return np.load(out)


@pytest.mark.parametrize("level", FAST_LEVELS)
def test_level_is_bit_exact_and_takes_its_fast_kernels(level, generic_outputs, tmp_path):
    kernels, counts = run_level(level, tmp_path / "outputs.npz")
    assert level.replace("-vbmi", "") in kernels["level"] and len(kernels["fast_modes"]) == 8, kernels
    outputs = np.load(tmp_path / "outputs.npz")
    different = [key for key in generic_outputs.files if not same_bits(outputs[key], generic_outputs[key]).all()]
    modes = kernel_modes()
    assert not different, [(modes[int(key.split("/")[0])], *key.split("/")[1:]) for key in different]
    for mode in modes:
        ordinary, mixed = counts[f"{mode}/ordinary"], counts[f"{mode}/mixed"]
        assert ordinary["generic_products"] == 0 and ordinary["fast_products"] > 0, (mode, ordinary)
        if mode != "fp16":  # IEEE half arithmetic has no range rule: fp16 is always fast
            assert mixed["generic_products"] > 0 and mixed["fast_products"] > 0, (mode, mixed)


def test_forcing_an_unknown_target_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("AMDNN_OPS_TARGET", "x86-64-v9")
    monkeypatch.setattr(common.platform, "machine", lambda: "x86_64")
    with pytest.raises(common.BuildError, match="not a target; valid: x86-64-v4-vbmi"):
        common.cpu_target()


def test_forcing_a_level_the_cpu_lacks_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("AMDNN_OPS_TARGET", "x86-64-v4-vbmi")
    monkeypatch.setattr(common.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(common, "cpu_flags", lambda: {"avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"})
    with pytest.raises(common.BuildError, match="needs CPU features this CPU lacks: .*avx512vbmi"):
        common.cpu_target()
