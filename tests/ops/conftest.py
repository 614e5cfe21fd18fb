"""Shared test inputs for the multiplier ops: the published tables, and operands reaching every rule of the definitions.

Plain functions, each also a fixture of the same name (the fixture of a function-valued helper returns the function,
so tests in this folder use them without importing conftest):

- `lut_dir()`: tests/data/approxtrain-luts, ApproxTrain's published MBM_7.bin, MIT_7.bin, ACC_7.bin (provenance and
  checksums in tests/data/README.md). The definitions are docs/multipliers-spec.md (read by spec_tables.py).
- `special_operands()`: ~480 float32 values whose pairs reach every rule of the definitions: signed zeros,
  subnormals, inf, NaN, and carry-boundary mantissas (Fa + Fb = ONE - 1, ONE, ONE + 1 for m = 23 and m = 7) at
  exponents that put a product just inside and just outside the range (e <= 0, e >= 255). A kernel test feeds them
  as [N, 1] x [1, N]: every pair, one product each, no accumulation.
- `random_operands(n, seed)`: float32 with random sign, every biased exponent 0..255 equally likely, random mantissa,
  and about 1 % special values: for bit-for-bit sweeps.
- `normal_operands(n, seed)`: float32 standard normal: the "random normal operands" of the spec's error columns.
- `same_bits(x, y)`: elementwise bit equality of float32 arrays, with any NaN equal to any NaN and +0 equal to -0
  (rule 4 and the unspecified NaN payload).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def lut_dir() -> Path:
    """tests/data/approxtrain-luts: MBM_7.bin, MIT_7.bin, ACC_7.bin."""
    return Path(__file__).resolve().parents[1] / "data" / "approxtrain-luts"


def _from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


# Values reaching rules 1 and 2 by themselves: zeros, subnormals (smallest and largest), the ends of the normal
# range, infinities, a quiet NaN of each sign and a signalling NaN.
SPECIAL_BITS = (
    0x00000000, 0x80000000,  # +0, -0
    0x00000001, 0x80000001,  # +-2**-149, the smallest subnormal
    0x007FFFFF, 0x807FFFFF,  # +-(2**-126 - 2**-149), the largest subnormal
    0x00800000, 0x80800000,  # +-2**-126, the smallest normal
    0x7F7FFFFF, 0xFF7FFFFF,  # +-largest finite
    0x7F800000, 0xFF800000,  # +-inf
    0x7FC00000, 0xFFC00000,  # quiet NaN, both signs
    0x7F800001,  # signalling NaN
)
# Mantissa fields whose pairs give Fa + Fb = ONE - 1, ONE and ONE + 1 (and the MBM corners near 0 and ONE - 1):
# for m = 23 the whole field; for m = 7 the top 7 bits, with the 16 dropped bits all 0 or all 1 (truncation).
_HALF23, _HALF7 = 1 << 22, 1 << 6
FIELDS_23 = (0, 1, _HALF23 - 1, _HALF23, _HALF23 + 1, (1 << 23) - 2, (1 << 23) - 1)
FIELDS_7 = tuple(
    (top << 16) | low for top in (0, 1, _HALF7 - 1, _HALF7, _HALF7 + 1, 126, 127) for low in (0, 0xFFFF)
)
# Biased exponents: 63 + 64 - 127 = 0 (zero unless the mantissa carries), 64 + 64 - 127 = 1 (the smallest normal),
# 190 + 191 - 127 = 254 (inf if it carries), 191 + 191 - 127 = 255 (inf); 1, 2, 253, 254 at the ends; 126..128 near 1.
BOUNDARY_EXPONENTS = (1, 2, 63, 64, 126, 127, 128, 190, 191, 253, 254)


def special_operands() -> np.ndarray:
    """1-D float32: SPECIAL_BITS plus every carry-boundary field at every boundary exponent, both signs (~480)."""
    fields = np.array(FIELDS_23 + FIELDS_7, dtype=np.uint64)
    exponents = np.array(BOUNDARY_EXPONENTS, dtype=np.uint64)
    magnitudes = (exponents[:, None] << np.uint64(23)) | fields[None, :]
    normal = np.concatenate([magnitudes.ravel(), magnitudes.ravel() | np.uint64(0x80000000)])
    return np.concatenate([_from_bits(SPECIAL_BITS), _from_bits(normal)])


def random_operands(n: int, seed: int = 0) -> np.ndarray:
    """n float32: random sign, biased exponent uniform over 0..255, random mantissa; ~1 % from special_operands()."""
    rng = np.random.default_rng(seed)
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(31)
    exponent = rng.integers(0, 256, n, dtype=np.uint64) << np.uint64(23)
    field = rng.integers(0, 1 << 23, n, dtype=np.uint64)
    values = _from_bits(sign | exponent | field)
    specials = special_operands()
    pick = rng.random(n) < 0.01
    values[pick] = specials[rng.integers(0, specials.size, int(pick.sum()))]
    return values


def normal_operands(n: int, seed: int = 0) -> np.ndarray:
    """n float32 drawn from the standard normal distribution."""
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def same_bits(x, y) -> np.ndarray:
    """Elementwise: x and y have the same fp32 bits, NaN matching any NaN and +0 matching -0 (rule 4)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    bits_x, bits_y = x.view(np.uint32), y.view(np.uint32)
    both_nan = np.isnan(x) & np.isnan(y)
    both_zero = (x == 0) & (y == 0)
    return (bits_x == bits_y) | both_nan | both_zero


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
