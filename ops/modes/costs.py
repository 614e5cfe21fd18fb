"""The hardware cost of a multiplier: power, area, delay and energy per multiply, each relative to the exact multiplier
of the same width, with the source the figures come from.

A built-in mode carries its figures in the registry (ops.modes.multipliers.MODES, `cost`), where a publication gives
them; a table (`lut:<file>`) carries them in a side file next to it, `<table stem>.cost.json`:

    {
      "power": 0.7082, "area": 0.7658, "delay": 0.9189,
      "source": "EvoApproxLib d321f7f6 (Mrazek et al., IEEE TVLSI 2018), PDK45 synthesis",
      "reference": "mul8s_1KV8",
      "absolute": {"pwr_mW": 0.301, "area_um2": 558.9, "delay_ns": 1.36}
    }

(mul8s_1L2H against the exact mul8s_1KV8: 0.301 / 0.425 mW, 558.9 / 729.8 um^2, 1.36 / 1.48 ns; EvoApproxLib gives no
energy, so this file has none.) Every figure is optional (what the source does not give stays absent, never guessed)
but `source` is required as soon as one is given; `reference` (the exact design the figures are relative to) and
`absolute` (the published numbers, in units of the source's choosing) are kept as they are for the reader. A figure
is a positive number: 0.7 means 70 % of the exact multiplier's. Nothing here changes what a multiplier computes, so none of it is part of a cell's identity.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

FIGURES = ("power", "area", "delay", "energy")  # relative to the exact multiplier of the same width
SIDE_KEYS = (*FIGURES, "source", "reference", "absolute")
SIDE_SUFFIX = ".cost.json"


@dataclass(frozen=True)
class Cost:
    """A multiplier's published figures relative to the exact multiplier of its width; None where none is known."""

    source: str                    # where the figures come from: a publication, or "by definition" for an exact one
    power: float | None = None
    area: float | None = None
    delay: float | None = None
    energy: float | None = None    # energy per multiply: what a run's relative multiplication energy sums
    reference: str | None = None   # the exact design the figures are relative to, where the source names one
    absolute: Mapping[str, Any] = field(default_factory=dict, compare=False)  # the source's own numbers, as given

    def figures(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in FIGURES}


def exact(width: str) -> Cost:
    """The exact multiplier of a width against itself: every figure 1."""
    return Cost(source=f"the exact {width} multiplier itself (1 by definition)", power=1.0, area=1.0, delay=1.0,
                energy=1.0)


def side_file(table: str | Path) -> Path:
    """Where a table's figures lie: beside it, <stem>.cost.json (MBM_7.bin -> MBM_7.cost.json)."""
    table = Path(table)
    return table.with_name(table.stem + SIDE_SUFFIX)


def read_side_file(table: str | Path) -> Cost | None:
    """The Cost in the table's side file, None where it has none; ValueError naming the file and the fix for a file
    that cannot be used."""
    path = side_file(table)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cost file {str(path)!r} is not readable JSON ({e}); {_FORMAT}") from None
    return from_mapping(data, where=f"cost file {str(path)!r}")


_FORMAT = ('write {"energy": 0.5, "power": 0.5, "area": 0.6, "delay": 0.8, "source": "the publication"}, each '
           "figure relative to the exact multiplier of the same width (ops/modes/costs.py)")


def from_mapping(data: Any, where: str) -> Cost:
    """A Cost from side-file data; ValueError listing every problem."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must hold a JSON object; {_FORMAT}")
    problems = [f"unknown key {key!r} (the keys are {', '.join(SIDE_KEYS)})" for key in data if key not in SIDE_KEYS]
    for name in FIGURES:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or value <= 0):
            problems.append(f"{name}={value!r} must be a positive number (relative to the exact multiplier: 1 = as "
                            "costly)")
    if not any(data.get(name) is not None for name in FIGURES):
        problems.append(f"no figure given: at least one of {', '.join(FIGURES)}")
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        problems.append("source is missing: name the publication (or library and commit) the figures come from")
    if data.get("absolute") is not None and not isinstance(data["absolute"], Mapping):
        problems.append("absolute must be an object of the source's own numbers, e.g. {\"power_mW\": 0.2}")
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    return Cost(source=source.strip(), reference=data.get("reference"), absolute=dict(data.get("absolute") or {}),
                **{name: None if data.get(name) is None else float(data[name]) for name in FIGURES})
