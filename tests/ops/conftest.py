"""Fixtures of the ops tests: the published tables, operands reaching every rule of the definitions, and the
libraries built once per session.

- `lut_dir`: tests/data/approxtrain-luts (tests/ops/luts.py), ApproxTrain's published MBM_7.bin, MIT_7.bin,
  ACC_7.bin. The definitions are docs/multipliers-spec.md (read by spec_tables.py).
- `special_operands`, `random_operands`, `normal_operands`, `same_bits`: the operand sets and bit comparison of
  ops/modes/operands.py (one source for these tests, the GPU tests and `python -m ops.selftest`); the fixture of a
  function returns the function. Helper modules import them from ops.modes.operands. A kernel test feeds special
  operands as [N, 1] x [1, N]: every pair, one product each, no accumulation.
- `built_library`: the TensorFlow library of this machine, built (once per cache entry) in the session's cache
  AMDNN_OPS_CACHE; tests whose subject is not the build itself use it rather than building their own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ops.build import BuildInfo, build
from ops.modes.operands import normal_operands, random_operands, same_bits, special_operands

from tests.ops.luts import lut_dir


@pytest.fixture(scope="session")
def built_library() -> BuildInfo:
    """The CPU library of this machine in the session's ops cache, built if that entry lacks it (one build per
    session at most; a warm cache builds nothing)."""
    return build()


@pytest.fixture(name="lut_dir")
def lut_dir_fixture() -> Path:
    return lut_dir()


@pytest.fixture(name="special_operands")
def special_operands_fixture() -> np.ndarray:
    return special_operands()


@pytest.fixture(name="random_operands")
def random_operands_fixture():
    """The random_operands function itself: call it with (n, seed)."""
    return random_operands


@pytest.fixture(name="normal_operands")
def normal_operands_fixture():
    """The normal_operands function itself: call it with (n, seed)."""
    return normal_operands


@pytest.fixture(name="same_bits")
def same_bits_fixture():
    """The same_bits function itself."""
    return same_bits
