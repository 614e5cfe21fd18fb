"""Every CPU target the build can choose computes the same bits: the AVX-512 kernels without VBMI (Skylake-X,
Cascade Lake: am16 by formula, lut generic) and the generic kernels of AVX2 machines, built here (this CPU runs
their instructions) and checked on single products against the numpy reference, in a subprocess per target."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ops import build

REPO = Path(__file__).resolve().parents[2]

CHECK = """
    import sys
    sys.path.insert(0, "tests/ops")
    import numpy as np
    import ops
    from ops import reference
    from ops.build import build
    from conftest import same_bits, special_operands
    from kernels import kernel_modes
    from test_kernel_products import OPERANDS
    assert build().target == sys.argv[1], (build().target, sys.argv[1])
    bad = []
    for multiplier in kernel_modes():
        for name, (left, right) in OPERANDS.items():
            got = ops.matmul(left[:, None], right[None, :], multiplier=multiplier).numpy()
            if not same_bits(got, reference.product(left[:, None], right[None, :], multiplier)).all():
                bad.append((multiplier, name))
    print("MISMATCHES", bad)
    sys.exit(1 if bad else 0)
"""


@pytest.mark.parametrize("target", ["x86-64-v4", "x86-64-v3"])
def test_lower_targets_are_bit_exact(target, tmp_path):
    flags = build.cpu_flags()
    needed = next(t[1] for t in build.X86_TARGETS if t[0] == target)
    if not needed <= flags:
        pytest.skip(f"this CPU cannot run {target} code (lacks {sorted(needed - flags)})")
    env = {**os.environ, "AMDNN_OPS_CACHE": str(tmp_path), "AMDNN_OPS_TARGET": target}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(CHECK), target], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "MISMATCHES []" in result.stdout


def test_forcing_an_unknown_target_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("AMDNN_OPS_TARGET", "x86-64-v9")
    monkeypatch.setattr(build.platform, "machine", lambda: "x86_64")
    with pytest.raises(build.BuildError, match="not a target; valid: x86-64-v4-vbmi"):
        build.cpu_target()
