"""EvoApproxLib's published figures of an 8x8 multiplier (its meta.json), and the cost side file and provenance they
give a table made from the circuit.

    meta = read_meta(path)                        meta.json's list of circuit sets
    published = find_published(meta, "mul8u_2AC") the circuit's figures, sets and references; None if not listed
    exact = exact_circuit(meta, published)        the exact circuit (mae% = 0) of the same 8x8 set: mul8u_1JFF
    cost_side_data(published, exact, significand_only=True)    a `<stem>.cost.json` object (ops/modes/costs.py)

meta.json lists circuit sets (multiplers/8x8_unsigned/pareto_pwr_mae, ...); a circuit is in every Pareto set it
belongs to, with the same figures: pwr (mW) and area (um^2) on PDK45, delay (ns), and the error percentages
(ops/modes/circuit_errors.py), all as strings.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ops.modes import costs

LIBRARY = "EvoApproxLib"
LIBRARY_URL = "https://github.com/ehw-fit/evoapproxlib"
LIBRARY_COMMIT = "d321f7f6"  # the commit of the C models and meta.json the project's tables come from
SYNTHESIS = "PDK45 synthesis"
# meta.json's figure -> (the cost side file's relative figure, the key of the absolute number in its unit)
FIGURES = {"pwr": ("power", "pwr_mW"), "area": ("area", "area_um2"), "delay": ("delay", "delay_ns")}
SIGNIFICAND_ONLY = ("figures of the 8x8 significand multiplier only, not of the exponent adder and normalisation "
                    "of a bfloat16 multiplier")


@dataclass(frozen=True)
class Published:
    """One circuit as meta.json lists it."""

    name: str
    params: Mapping[str, str]            # meta.json's strings, as given: {"pwr": "0.311", "mae%": "0.037", ...}
    sets: tuple[str, ...]                # the folders of the sets listing it: multiplers/8x8_unsigned/pareto_pwr_mae
    family: str                          # the folder of its width and signedness: multiplers/8x8_unsigned
    references: tuple[str, ...] = field(default=())   # the publications meta.json gives for its sets

    @property
    def is_exact(self) -> bool:
        return float(self.params["mae%"]) == 0


def default_meta(c_file: str | os.PathLike) -> Path | None:
    """meta.json beside the C file or one folder up (EvoApproxLib's layout: mul8u/mul8u_2AC.c, meta.json); None if
    neither exists."""
    folder = Path(c_file).resolve().parent
    for candidate in (folder / "meta.json", folder.parent / "meta.json"):
        if candidate.is_file():
            return candidate
    return None


def read_meta(path: str | os.PathLike) -> list:
    """meta.json's list of circuit sets; ValueError naming the file if it is not one."""
    try:
        meta = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"meta file {str(path)!r} is not readable JSON: {e}") from None
    if not isinstance(meta, list):
        raise ValueError(f"meta file {str(path)!r} is not EvoApproxLib's meta.json (a list of circuit sets)")
    return meta


def _instances(meta: list):
    """(family folder, set folder, set references, instance) for every circuit of every set."""
    for group in meta:
        for family in group.get("datasets", []):
            for subset in family.get("datasets", []):
                for instance in subset.get("instances", []):
                    yield family["folder"], subset["folder"], tuple(subset.get("references", [])), instance


def find_published(meta: list, name: str) -> Published | None:
    """The circuit `name` as meta.json lists it, its sets gathered; None where it is not listed."""
    found = [(family, folder, refs, inst) for family, folder, refs, inst in _instances(meta) if inst["name"] == name]
    if not found:
        return None
    family, _, _, instance = found[0]
    references = tuple(dict.fromkeys(refs[i] for _, _, refs, inst in found for i in inst.get("references", [])
                                     if i < len(refs)))
    return Published(name, dict(instance["params"]), tuple(dict.fromkeys(f for _, f, _, _ in found)), family,
                     references)


def exact_circuit(meta: list, circuit: Published) -> Published:
    """The exact circuit (mae% = 0) of the circuit's family (multiplers/8x8_unsigned: mul8u_1JFF); ValueError if the
    family has none or several."""
    names = list(dict.fromkeys(inst["name"] for family, _, _, inst in _instances(meta)
                               if family == circuit.family and float(inst["params"]["mae%"]) == 0))
    if len(names) != 1:
        raise ValueError(f"{circuit.family} has {len(names)} exact circuits (mae% = 0) in meta.json "
                         f"({', '.join(names) or 'none'}); the figures need exactly one to be relative to")
    return find_published(meta, names[0])


def cost_side_data(circuit: Published, exact: Published, significand_only: bool,
                   commit: str = LIBRARY_COMMIT) -> dict[str, Any]:
    """The cost side file of a table of `circuit`: power, area and delay over the exact circuit's (a published 0,
    e.g. a circuit that is a constant, is left out: a figure is positive), no energy (EvoApproxLib gives none),
    checked by costs.from_mapping."""
    data: dict[str, Any] = {}
    absolute: dict[str, float] = {}
    for key, (figure, unit) in FIGURES.items():
        value, reference = float(circuit.params[key]), float(exact.params[key])
        absolute[unit] = value
        if value > 0 and reference > 0:
            data[figure] = float(f"{value / reference:.4g}")  # 4 digits: the figures have 3 or 4
    paper = "; ".join(circuit.references)
    source = f"{LIBRARY} {commit}" + (f" ({paper})" if paper else "") + f", {SYNTHESIS}"
    if significand_only:
        source += f"; {SIGNIFICAND_ONLY}"
    data.update(source=source, reference=exact.name, absolute=absolute)
    costs.from_mapping(data, where=f"cost figures of {circuit.name}")  # raises ValueError if the data cannot be used
    return data
