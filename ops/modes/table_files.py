"""Mantissa-product tables in the ApproxTrain format as files and arrays: read, validate, write, expand to m = 7.

A table for m-bit fields holds 4**m bytes; the byte at index (Fa << m) | Fb is c << 7 | M, with c the carry (the
product of 1.Fa x 1.Fb reached 2) and M the m-bit result mantissa. docs/multipliers-spec.md defines the format
(section "Tables") and the multipliers. Making a mode's table is ops/modes/table_make.py; this module knows no
mode, so that ops.modes.multipliers can read the table of a lut mode with it.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ops.atomic import write_bytes

MIN_BITS, MAX_BITS = 1, 7  # M and the carry share one byte: M has at most 7 bits
ALLOWED_SIZES = tuple(4**m for m in range(MIN_BITS, MAX_BITS + 1))  # 4, 16, 64, 256, 1024, 4096, 16384 bytes
CARRY_BIT = 0x80
MANTISSA_MASK = 0x7F


def read_table(path: str | os.PathLike) -> np.ndarray:
    """The (2**m, 2**m) uint8 table in `path`, m from the file size; ValueError naming the file if it is unusable."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"table file {str(path)!r} does not exist (expected an ApproxTrain-format table)") from None
    except OSError as err:
        raise ValueError(f"table file {str(path)!r} cannot be read: {err.strerror or err}") from None
    if len(data) not in ALLOWED_SIZES:
        raise ValueError(
            f"table file {str(path)!r} has {len(data)} bytes; an ApproxTrain table has 4**m bytes for "
            f"m = {MIN_BITS}..{MAX_BITS}: one of {', '.join(map(str, ALLOWED_SIZES))}"
        )
    m = ALLOWED_SIZES.index(len(data)) + MIN_BITS
    table = np.frombuffer(data, dtype=np.uint8).reshape(2**m, 2**m).copy()
    _check_entries(table, m, where=f"table file {str(path)!r}")
    return table


def save_table(table: np.ndarray, path: str | os.PathLike) -> Path:
    """Write a (2**m, 2**m) table of bytes to `path` atomically, after checking it; returns the path.

    Atomic (ops/atomic.py) so that a job reading the table while another writes it sees the old bytes or the new
    ones, never half a file.
    """
    table = np.asarray(table)
    m = _table_bits(table, where="table to write")
    if table.dtype != np.uint8:
        if not np.issubdtype(table.dtype, np.integer) or table.min() < 0 or table.max() > 255:
            raise ValueError(f"table to write must hold bytes 0..255 (uint8), got dtype {table.dtype}")
        table = table.astype(np.uint8)
    _check_entries(table, m, where="table to write")
    path = Path(path)
    write_bytes(path, np.ascontiguousarray(table).tobytes())
    return path


def canonical7(table: np.ndarray) -> np.ndarray:
    """The (128, 128) m = 7 form of an m-bit table: what the compiled kernels consume.

    The entry for 7-bit fields (Fa7, Fb7) is T[Fa7 >> (7-m)][Fb7 >> (7-m)] with M shifted left by 7 - m and c kept,
    so a kernel indexing with the top 7 mantissa bits gives the same product as the m-bit table indexed with the top
    m bits.
    """
    table = np.asarray(table, dtype=np.uint8)
    m = _table_bits(table, where="table")
    shift = MAX_BITS - m
    fields7 = np.arange(2**MAX_BITS) >> shift
    entries = table[fields7[:, None], fields7[None, :]]
    mantissa = (entries & MANTISSA_MASK) << shift
    return ((entries & CARRY_BIT) | mantissa).astype(np.uint8)


def _table_bits(table: np.ndarray, where: str) -> int:
    """m of a square (2**m, 2**m) table with 1 <= m <= 7, else ValueError."""
    shapes = ", ".join(f"({2**m}, {2**m})" for m in range(MIN_BITS, MAX_BITS + 1))
    if table.ndim != 2 or table.shape[0] != table.shape[1] or table.shape[0] not in [2**m for m in range(1, 8)]:
        raise ValueError(f"{where} has shape {table.shape}; a table is (2**m, 2**m) for m = 1..7: one of {shapes}")
    return int(table.shape[0]).bit_length() - 1


def _check_entries(table: np.ndarray, m: int, where: str) -> None:
    """ValueError naming the first entry whose mantissa M does not fit in m bits."""
    bad = np.flatnonzero((table.reshape(-1) & MANTISSA_MASK) >= 2**m)
    if bad.size:
        index = int(bad[0])
        value = int(table.reshape(-1)[index])
        raise ValueError(
            f"{where}: entry {index} (Fa = {index >> m}, Fb = {index & (2**m - 1)}) is {value} = 0x{value:02x}, "
            f"whose mantissa {value & MANTISSA_MASK} does not fit in m = {m} bits (must be < {2**m}); "
            f"{bad.size} bad entries in all"
        )
