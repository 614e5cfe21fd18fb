"""Operands that reach every rule of the multiplier definitions, and bit comparison: what every bit-for-bit check of
the kernels feeds them (the CPU tests, the GPU tests and `python -m ops.selftest`). numpy only.

- `special_operands()`: ~600 float32 values whose pairs reach every rule of docs/multipliers-spec.md: signed zeros,
  subnormals, inf, NaN (quiet, signalling, with a payload), carry-boundary mantissas (Fa + Fb = ONE - 1, ONE, ONE + 1
  for m = 23 and m = 7) at exponents that put a product just inside and just outside the range (e <= 0, e >= 255),
  and the edges of fp16's range. Fed as [N, 1] x [1, N] they give every pair, one product each.
- `random_operands(n, seed)`: random sign, every biased exponent 0..255 equally likely, random mantissa, ~1 % special.
- `fast_operands(n, seed)`: exponents 64..190 (where the kernels' fast paths apply), 40 % carry-boundary mantissas,
  5 % zeros.
- `normal_operands(n, seed)`: standard normal, the "random normal operands" of the spec's error columns.
- `same_bits(x, y, nan_payloads=False)`: elementwise equality of fp32 bits, +0 equal to -0 (rule 4); any NaN equal to
  any NaN unless nan_payloads (the kernels of one build must agree on payloads too; the definitions leave them open).
"""

from __future__ import annotations

import numpy as np


def _from_bits(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


# Values reaching rules 1 and 2 by themselves: zeros, subnormals (smallest and largest), the ends of the normal
# range, infinities, a quiet NaN of each sign, signalling NaNs (one with a payload), and fp16's edges.
SPECIAL_BITS = (
    0x00000000, 0x80000000,  # +0, -0
    0x00000001, 0x80000001,  # +-2**-149, the smallest subnormal
    0x007FFFFF, 0x807FFFFF,  # +-(2**-126 - 2**-149), the largest subnormal
    0x00800000, 0x80800000,  # +-2**-126, the smallest normal
    0x7F7FFFFF, 0xFF7FFFFF,  # +-largest finite
    0x7F800000, 0xFF800000,  # +-inf
    0x7FC00000, 0xFFC00000,  # quiet NaN, both signs
    0x7F800001, 0x7FA00001,  # signalling NaNs; the second's payload survives quieting
    0x477FEFFF, 0x477FF000,  # just below / at the value that rounds to fp16's inf (65520)
    0x33000000, 0x33000001,  # 2**-25 (rounds to fp16's zero) and just above (its smallest subnormal)
    0x387FFFFF, 0x38800000,  # just below / at fp16's smallest normal 2**-14
)
# Mantissa fields whose pairs give Fa + Fb = ONE - 1, ONE and ONE + 1 (and the MBM corners near 0 and ONE - 1):
# for m = 23 the whole field; for m = 7 the top 7 bits, with the 16 dropped bits all 0 or all 1 (truncation).
_HALF23, _HALF7 = 1 << 22, 1 << 6
FIELDS_23 = (0, 1, _HALF23 - 1, _HALF23, _HALF23 + 1, (1 << 23) - 2, (1 << 23) - 1)
FIELDS_7 = tuple(
    (top << 16) | low for top in (0, 1, _HALF7 - 1, _HALF7, _HALF7 + 1, 126, 127) for low in (0, 0xFFFF)
)
# Biased exponents: 63 + 64 - 127 = 0 (zero unless the mantissa carries), 64 + 64 - 127 = 1 (the smallest normal),
# 190 + 191 - 127 = 254 (inf if it carries), 191 + 191 - 127 = 255 (inf); 1, 2, 253, 254 at the ends; 126..128 near 1;
# 65 and 189 just inside the fast paths' range.
BOUNDARY_EXPONENTS = (1, 2, 63, 64, 65, 126, 127, 128, 189, 190, 191, 253, 254)
# The exponents where every product of two operands is a normal number or zero: the kernels' fast-path domain.
FAST_EXPONENTS = (64, 190)


def special_operands() -> np.ndarray:
    """1-D float32: SPECIAL_BITS plus every carry-boundary field at every boundary exponent, both signs."""
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


def fast_operands(n: int, seed: int = 0) -> np.ndarray:
    """n float32 in the fast paths' domain: exponents 64..190, 40 % carry-boundary mantissas, 5 % zeros."""
    rng = np.random.default_rng(seed)
    exponent = rng.integers(FAST_EXPONENTS[0], FAST_EXPONENTS[1] + 1, n).astype(np.uint64) << np.uint64(23)
    boundary = np.array(FIELDS_23 + FIELDS_7, np.uint64)
    field = np.where(rng.random(n) < 0.4, boundary[rng.integers(0, boundary.size, n)],
                     rng.integers(0, 1 << 23, n).astype(np.uint64))
    values = _from_bits((rng.integers(0, 2, n).astype(np.uint64) << np.uint64(31)) | exponent | field)
    values[rng.random(n) < 0.05] = 0.0
    return values


def normal_operands(n: int, seed: int = 0) -> np.ndarray:
    """n float32 drawn from the standard normal distribution."""
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def bits(x) -> np.ndarray:
    """The uint32 bit patterns of float32 values."""
    return np.asarray(x, np.float32).view(np.uint32)


def same_bits(x, y, nan_payloads: bool = False) -> np.ndarray:
    """Elementwise: x and y have the same fp32 bits, +0 matching -0 (rule 4); NaN matching any NaN unless
    nan_payloads, where a NaN must have the other's bits."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    same = (bits(x) == bits(y)) | ((x == 0) & (y == 0))
    return same if nan_payloads else same | (np.isnan(x) & np.isnan(y))
