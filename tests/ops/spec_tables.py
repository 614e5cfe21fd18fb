"""The tables of the specification (docs/multipliers-spec.md) as test data: its worked examples and its error columns.

The spec is the normative text; the tests read these two tables from it rather than keeping copies, so the examples
a reader sees are the ones the reference (and through it every kernel) is checked against.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

SPEC = Path(__file__).resolve().parents[2] / "docs" / "multipliers-spec.md"


def markdown_table(anchor: str) -> list[dict[str, str]]:
    """The rows (header -> cell) of the first table of the spec at or after the first line starting with `anchor`."""
    lines = SPEC.read_text().splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith(anchor)), None)
    if first is None:
        raise ValueError(f"{SPEC} has no line starting with {anchor!r}: the tests read a table from there")
    start = next(i for i in range(first, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    header, separator, body = rows[0], rows[1], rows[2:]
    assert set("".join(separator)) <= set("-:"), f"{SPEC}: the table under {heading!r} has no separator line"
    return [dict(zip(header, row, strict=True)) for row in body]


def _float32(cell: str) -> np.float32:
    """The operand or product of a cell written "`0xBITS` value": its bits decide, the value is for readers."""
    bits = re.match(r"`0x([0-9A-Fa-f]{8})`", cell)
    if bits is None:
        raise ValueError(f"{SPEC}: cell {cell!r} does not start with the fp32 bits as `0x........`")
    return np.array([int(bits[1], 16)], dtype=np.uint32).view(np.float32)[0]


def worked_examples() -> list[tuple[np.float32, np.float32, str, np.float32, str]]:
    """(a, b, mode, a x b, how) for every row of the spec's worked examples."""
    return [(_float32(row["a"]), _float32(row["b"]), row["mode"].strip("`"), _float32(row["a x b"]), row["how"])
            for row in markdown_table("## Worked examples")]


def _percent(cell: str) -> float:
    """"~0.83 %" -> 0.0083, "~-3.8 % ..." -> -0.038, "0" and "~0" -> 0.0: the first number of the cell."""
    number = re.match(r"~?([+-]?\d+(?:\.\d+)?)( %)?", cell)
    if number is None:
        raise ValueError(f"{SPEC}: error cell {cell!r} does not start with a number such as ~2.8 %")
    return float(number[1]) / (100 if number[2] else 1)


def error_table() -> list[tuple[str, float, float, bool]]:
    """(mode, mean |relative error|, bias, every error <= 0) for each mode of the spec's table that has an error."""
    return [(row["mode"].strip("`"), _percent(row["mean relative error"]), _percent(row["bias (mean relative error)"]),
             row["sign of every error"] == "<= 0")
            for row in markdown_table("| mode | what it simulates |") if row["mean relative error"] != "-"]
