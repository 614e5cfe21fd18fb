"""8x8 integer product tables as files: `<circuit>.int8u.npy` (unsigned) and `<circuit>.int8s.npy` (signed).

A table is numpy's .npy format (self-describing: dtype, shape, byte order) holding a (256, 256) array, table[a, b] =
the product of the operands whose bit patterns are a and b (0..255; for signed operands the two's-complement byte,
a = 255 being -1): little-endian uint16 for unsigned circuits, int16 for signed ones. 131,200 bytes each
(128-byte header). `numpy.load(path)` reads one; read_integer_table also checks it.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from ops.atomic import write_bytes
from ops.modes.c_models import TABLE_DTYPES
from ops.modes.circuit_errors import exact_products

SUFFIXES = {"unsigned": ".int8u.npy", "signed": ".int8s.npy"}
SHAPE = (256, 256)


def table_file_name(circuit_name: str, kind: str) -> str:
    """mul8u_2AC, unsigned -> mul8u_2AC.int8u.npy."""
    return circuit_name + SUFFIXES[kind]


def kind_of_file(path: str | os.PathLike) -> str:
    """"unsigned" or "signed" from the file's suffix; ValueError naming the suffixes for another name."""
    for kind, suffix in SUFFIXES.items():
        if str(path).endswith(suffix):
            return kind
    raise ValueError(f"{str(path)!r} is not an integer table: its name ends in {' or '.join(SUFFIXES.values())}")


def exact_table(kind: str) -> np.ndarray:
    """The exact multiplier's table of the kind (what an exact circuit must enumerate to)."""
    return exact_products(kind).astype(TABLE_DTYPES[kind])


def _check(table: np.ndarray, kind: str, where: str) -> None:
    if table.shape != SHAPE or table.dtype != TABLE_DTYPES[kind]:
        raise ValueError(f"{where} holds a {table.dtype} array of shape {table.shape}; a {kind} 8x8 product table "
                         f"is {TABLE_DTYPES[kind]} of shape {SHAPE}")


def save_integer_table(table: np.ndarray, kind: str, path: str | os.PathLike) -> Path:
    """Write the table as .npy atomically (ops/atomic.py); returns the path."""
    table = np.asarray(table)
    _check(table, kind, "table to write")
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(table), allow_pickle=False)
    path = Path(path)
    write_bytes(path, buffer.getvalue())
    return path


def read_integer_table(path: str | os.PathLike) -> tuple[np.ndarray, str]:
    """(table, kind) of an .int8u.npy / .int8s.npy file; ValueError naming the file if it is not one."""
    kind = kind_of_file(path)
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"integer table {str(path)!r} cannot be read as .npy: {e}") from None
    _check(table, kind, f"integer table {str(path)!r}")
    return table, kind
