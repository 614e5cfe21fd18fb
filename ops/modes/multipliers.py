"""The multiplier modes: the one registry that configs, ops, docs, benchmarks and tests all read.

A mode is named in configs (`mult=am16`) and in the Python API (`multiplier="am16"`); `parse` turns that name into a
`Multiplier`, and `names()` lists the valid ones. The exact definition of every mode is docs/multipliers-spec.md;
ops/modes/reference.py implements it in numpy, the compiled kernels in ops/cc/.

MODES and names() are the one list of modes: keep them in this one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ops.modes.costs import Cost, exact, read_side_file, side_file
from ops.modes.integer_names import KIND_AND_SCHEME, NAMES as INTEGER_NAMES
from ops.modes.integer_tables import read_integer_table
from ops.modes.table_files import read_table

# The pattern a table mode is written in; anything after the prefix is a path to an ApproxTrain-format table.
# In configs the table is its own option, mult=lut mult.table=FILE (conf/mult/lut.yaml): LUT_NAME.
LUT_NAME = "lut"
LUT_PREFIX = LUT_NAME + ":"
LUT_PATTERN = LUT_PREFIX + "<file>"

# The framework's own layers: no custom op, no product mode (models build Keras' Conv2D/Dense for it).
NATIVE = "native"

# The modes that take a table file (`mult.table`, or "<name>:<file>"): lut needs one; an integer mode without one is
# the exact multiplier of its kind (ops.modes.integer_names).
TABLE_NAMES = (LUT_NAME, *INTEGER_NAMES)

# Families: how the mantissa product is formed (the "Mantissa products" section of docs/multipliers-spec.md).
FAMILIES = ("native", "ieee32", "ieee16", "bf16", "mbm", "mitchell", "table", "integer")


@dataclass(frozen=True)
class Multiplier:
    """One multiplier mode: what `parse` returns and what the kernels and the reference are configured with."""

    name: str  # as written in configs: "am16", "lut:/path/MBM_7.bin"
    family: str  # one of FAMILIES
    mantissa_bits: int | None  # m of the definition: 23, 10 (fp16), 7, or a table's m; None for native
    description: str  # one line, from the spec's table of modes
    # (2**m, 2**m) uint8 table of c << 7 | M for lut modes (read-only, shared between parses), else None.
    # Left out of ==/hash: two parses of one unchanged file are the same mode.
    table: np.ndarray | None = field(default=None, compare=False, repr=False)
    path: Path | None = None  # the table file for lut modes, else None
    # Power, area, delay, energy per multiply relative to the exact multiplier of the same width, with their source
    # (ops.modes.costs); None where no publication gives them. A table's come from its side file.
    cost: Cost | None = field(default=None, compare=False)

    @property
    def is_native(self) -> bool:
        """True for the framework's own layers (no custom op, no product mode)."""
        return self.family == "native"

    @property
    def is_integer(self) -> bool:
        """True for the integer modes: 8-bit codes, products from a 256 x 256 table (the integer layers)."""
        return self.family == "integer"


MODES: tuple[Multiplier, ...] = (
    Multiplier(NATIVE, "native", None,
               "no custom op: the framework's own Conv2D/Dense (cuDNN, oneDNN); the reference column",
               cost=exact("fp32")),
    Multiplier("acc32", "ieee32", 23,
               "exact fp32 multiply inside the custom op (validates the op against native)", cost=exact("fp32")),
    Multiplier("acc16", "bf16", 7,
               "exact multiply of bfloat16 operands, product truncated to bfloat16", cost=exact("bfloat16")),
    Multiplier("fp16", "ieee16", 10,
               "IEEE half precision: operands and product rounded to fp16", cost=exact("IEEE binary16")),
    # am32, am16, mit32, mit16: no figures; docs/multipliers.md says why (bench/multiplier_stats.py, NO_FIGURES).
    Multiplier("am32", "mbm", 23,
               "Minimally Biased Multiplier (MBM) on full fp32 mantissas"),
    Multiplier("am16", "mbm", 7,
               "MBM on bfloat16 operands"),
    Multiplier("mit32", "mitchell", 23,
               "Mitchell logarithmic multiplier on fp32 mantissas"),
    Multiplier("mit16", "mitchell", 7,
               "Mitchell on bfloat16 operands"),
)
_BY_NAME = {mode.name: mode for mode in MODES}
LUT_DESCRIPTION = ("any multiplier given as a table in the ApproxTrain format "
                   "(docs/multipliers-spec.md, section Tables)")

# Parsed lut modes keyed by (resolved path, mtime_ns, size): a config naming one table for every layer reads it once,
# and an edited file (new mtime or size, or a new side file of figures) is read again.
_LUT_CACHE: dict[tuple[str, int, int, int | None], Multiplier] = {}


def names(include_native: bool = True) -> list[str]:
    """The named modes in registry order (the lut pattern is not a name: see LUT_PATTERN)."""
    return [mode.name for mode in MODES if include_native or not mode.is_native]


def integer_names() -> list[str]:
    """The integer modes' names (each alone the exact multiplier of its kind, or with a table file)."""
    return list(INTEGER_NAMES)


def compose(name: str, table: str | os.PathLike | None) -> str:
    """A mode and its table file as ops take it: "name", or "name:<absolute path>" for a table."""
    if name in TABLE_NAMES and table not in (None, ""):
        return f"{name}:{os.path.abspath(os.path.expanduser(str(table)))}"
    return name


def decompose(spec: str) -> tuple[str, str | None]:
    """(name, table file or None) of a spec: compose's inverse."""
    name, colon, path = spec.partition(":")
    return (name, path or None) if colon and name in TABLE_NAMES else (spec, None)


def label(name: str, table: str | os.PathLike | None) -> str:
    """As the results table names it: the mode, or "name:<table file name>"."""
    if name in TABLE_NAMES and table not in (None, ""):
        return f"{name}:{os.path.basename(str(table))}"
    return name


def parse(spec: str | Multiplier) -> Multiplier:
    """The Multiplier for a name from `names()` or for "lut:<path>"; a Multiplier is returned unchanged.

    Raises ValueError for an unknown name (listing every valid choice) and for a table file that cannot be used
    (naming the file and what a valid one looks like).
    """
    if isinstance(spec, Multiplier):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"multiplier must be a str or Multiplier, got {type(spec).__name__}: {spec!r}")
    if spec in _BY_NAME:
        return _BY_NAME[spec]
    if spec.startswith(LUT_PREFIX):
        return _parse_lut(spec)
    if spec.partition(":")[0] in INTEGER_NAMES:
        return _parse_integer(spec)
    raise ValueError(
        f"unknown multiplier {spec!r}; valid choices: {', '.join(names())}, or {LUT_PATTERN} "
        f"(a table in the ApproxTrain format, 4**m bytes for m = 1..7), or an integer mode "
        f"({', '.join(INTEGER_NAMES)}, each also as <name>:<file> with a .int8s.npy / .int8u.npy table)"
    )


def _parse_integer(spec: str) -> Multiplier:
    name, _, raw_path = spec.partition(":")
    kind, scheme = KIND_AND_SCHEME[name]
    what = f"{scheme} {kind} 8-bit codes"
    if not raw_path:
        if ":" in spec:
            raise ValueError(f"multiplier {spec!r} names no table file; write {name} alone (the exact multiplier) or "
                             f"{name}:<file>")
        return Multiplier(spec, "integer", None, f"the exact 8-bit multiplier on {what}", cost=exact(f"{kind} 8-bit"))
    path = Path(raw_path).expanduser().resolve()
    _, file_kind = read_integer_table(path)  # raises ValueError naming the file for a missing or bad table
    if file_kind != kind:
        raise ValueError(f"multiplier {spec!r}: {path.name} is a {file_kind} table; {name} takes a {kind} one "
                         f"(int8* take .int8s.npy tables, uint8* .int8u.npy ones)")
    return Multiplier(spec, "integer", None, f"table {path.name} on {what}", path=path, cost=read_side_file(path))


def _parse_lut(spec: str) -> Multiplier:
    raw_path = spec[len(LUT_PREFIX):]
    if not raw_path:
        raise ValueError(f"multiplier {spec!r} names no table file; write {LUT_PATTERN}, e.g. lut:luts/MBM_7.bin")
    path = Path(raw_path).expanduser().resolve()
    try:
        stat = os.stat(path)
    except OSError:
        stat = None
    try:
        side = os.stat(side_file(path)).st_mtime_ns
    except OSError:
        side = None
    key = (str(path), stat.st_mtime_ns, stat.st_size, side) if stat is not None else None
    if key is not None and key in _LUT_CACHE:
        return _LUT_CACHE[key]
    table = read_table(path)  # raises ValueError naming the file for a missing file or a bad size or entry
    table.setflags(write=False)  # shared by every parse of this file
    m = int(table.shape[0]).bit_length() - 1
    cost = read_side_file(path)  # raises ValueError naming a side file that cannot be used
    mode = Multiplier(spec, "table", m, f"table {path.name} (m = {m}): {LUT_DESCRIPTION}", table, path, cost)
    if key is not None:
        _LUT_CACHE[key] = mode
    return mode
