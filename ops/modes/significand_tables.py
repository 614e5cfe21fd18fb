"""A bfloat16 mantissa-product table (ApproxTrain format, m = 7) made from an unsigned 8x8 integer multiplier used as
the significand multiplier.

    table, clamped = significand_table(int8u_table)     (128, 128) uint8, and how many entries were clamped

A bfloat16 significand is 8 bits with the hidden 1: A = 128 | Fa, B = 128 | Fb for the 7-bit fields Fa, Fb; the
circuit's product P = f(A, B) is in units of 2^-14, so the exact one lies in [2^14, 2^16). The entry is the
ApproxTrain byte c << 7 | M with the product truncated to 7 mantissa bits, as ACC_7.bin is defined:

    P >= 2^15:        0x80 | ((P >> 8) & 127)      (the product reached 2: exponent + 1)
    2^14 <= P < 2^15: (P >> 7) & 127
    P < 2^14:         0  (clamped: see below)

An approximate circuit may return P < 2^14, a product below 1.0 for significands that are both at least 1.0. The
format has no entry for it (it would need an exponent - 1), so such an entry is clamped to 1.0 (c = 0, M = 0), the
nearest value the format can hold; significand_table returns how many entries were clamped, and `ops.tables`
prints it and records it in the table's provenance. With the exact circuit the table is ACC_7.bin, byte for byte.
"""

from __future__ import annotations

import numpy as np

from ops.modes.table_files import CARRY_BIT, MANTISSA_MASK

FIELD_BITS = 7                     # bfloat16's mantissa field: the table's m
HIDDEN_ONE = 1 << FIELD_BITS       # 128: the significand's leading 1
ONE = 1 << (2 * FIELD_BITS)        # 2^14: the product 1.0 in units of 2^-14
TWO = ONE << 1                     # 2^15: the product 2.0


def significands() -> np.ndarray:
    """The 128 significands 128 | F for the fields F = 0..127: the operands an entry's row and column feed."""
    return HIDDEN_ONE | np.arange(HIDDEN_ONE)


def significand_table(integer_table: np.ndarray) -> tuple[np.ndarray, int]:
    """(128, 128) uint8 ApproxTrain table of the unsigned (256, 256) product table used as significand multiplier,
    and the number of entries clamped to 1.0 (products below 2^14)."""
    integer_table = np.asarray(integer_table)
    if integer_table.shape != (256, 256) or integer_table.dtype.kind != "u":
        raise ValueError(f"a significand table is made from an unsigned (256, 256) product table (a mul8u circuit), "
                         f"got {integer_table.dtype} of shape {integer_table.shape}")
    rows = significands()
    product = integer_table[rows[:, None], rows[None, :]].astype(np.int64)  # [Fa, Fb] = f(128|Fa, 128|Fb)
    above_two = product >= TWO
    entry = np.where(above_two, CARRY_BIT | ((product >> (FIELD_BITS + 1)) & MANTISSA_MASK),
                     (product >> FIELD_BITS) & MANTISSA_MASK)
    below_one = product < ONE
    entry[below_one] = 0
    return entry.astype(np.uint8), int(below_one.sum())
