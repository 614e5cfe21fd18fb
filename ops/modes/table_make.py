"""A closed-form mode's mantissa-product table, made from the reference definition, and written as a file.

    make_table("am16", m=7) -> (2**m, 2**m) uint8 array      write_table("mit16" or an array, path) -> path

At m = 7 the tables of am16, mit16 and acc16 equal ApproxTrain's MBM_7.bin, MIT_7.bin and ACC_7.bin byte for byte.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ops.modes.multipliers import MODES, parse
from ops.modes.reference import mantissa_product
from ops.modes.table_files import MAX_BITS, MIN_BITS, save_table

# make_table's families: the bf16 (acc16) definition generalises to any m as "exact product of m-bit-mantissa
# operands, truncated to m bits" (at m = 7 it is the spec's acc16 formula), so every family takes m = 1..7.
TABLE_FAMILIES = ("mbm", "mitchell", "bf16")


def make_table(multiplier_name: str, m: int = 7) -> np.ndarray:
    """The (2**m, 2**m) table of a closed-form mode: am16/am32 (MBM), mit16/mit32 (Mitchell), acc16 (bf16).

    The mode's family picks the mantissa product and `m` the field width, so make_table("am32", 7) equals
    make_table("am16", 7). At m = 7 the tables of am16, mit16 and acc16 equal ApproxTrain's MBM_7.bin, MIT_7.bin
    and ACC_7.bin byte for byte.
    """
    mode = parse(multiplier_name)
    if mode.family not in TABLE_FAMILIES:
        raise ValueError(
            f"multiplier {mode.name!r} ({mode.family}) has no mantissa-product table; "
            f"tables are made for: {', '.join(_names_with_family(TABLE_FAMILIES))}"
        )
    if not (isinstance(m, (int, np.integer)) and MIN_BITS <= m <= MAX_BITS):
        raise ValueError(f"m = {m!r} cannot be tabulated: a table entry holds M in 7 bits, so m must be 1..7")
    fields = np.arange(2**m, dtype=np.uint32)
    carry, mantissa = mantissa_product(fields[:, None], fields[None, :], mode.family, int(m))
    return ((carry.astype(np.uint8) << 7) | mantissa.astype(np.uint8)).astype(np.uint8)


def write_table(table_or_name: np.ndarray | str, path: str | os.PathLike) -> Path:
    """Write a table (an array, or a mode name for make_table at m = 7) to `path` atomically; returns the path."""
    return save_table(make_table(table_or_name) if isinstance(table_or_name, str) else table_or_name, path)


def _names_with_family(families: tuple[str, ...]) -> list[str]:
    return [mode.name for mode in MODES if mode.family in families]
