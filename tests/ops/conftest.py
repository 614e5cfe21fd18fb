"""Shared test inputs for the multiplier ops: the published tables, and operands reaching every rule of the definitions.

Plain functions, each also a fixture of the same name (the fixture of a function-valued helper returns the function,
so tests in this folder use them without importing conftest):

- `lut_dir()`: tests/data/approxtrain-luts, ApproxTrain's published MBM_7.bin, MIT_7.bin, ACC_7.bin (provenance and
  checksums in tests/data/README.md). The definitions are docs/multipliers-spec.md (read by spec_tables.py).
- `special_operands()`, `random_operands(n, seed)`, `normal_operands(n, seed)`, `same_bits(x, y)`: the operand sets
  and bit comparison of ops/operands.py (one source for these tests, the GPU tests and `python -m ops.selftest`).
  A kernel test feeds special operands as [N, 1] x [1, N]: every pair, one product each, no accumulation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ops.operands import normal_operands, random_operands, same_bits, special_operands


def lut_dir() -> Path:
    """tests/data/approxtrain-luts: MBM_7.bin, MIT_7.bin, ACC_7.bin."""
    return Path(__file__).resolve().parents[1] / "data" / "approxtrain-luts"


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
