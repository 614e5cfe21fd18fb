"""The layer sensitivity grid: one cell per layer with only that layer approximated (or only that layer kept exact),
and the two ends, as one launch.py sweep.

    approximate-one (default)   mult=native, and per layer L and multiplier M the rules [{match: L, mult: M}];
                                the ends: [] (all native, the reference) and [{match: all, mult: M}] (the cell
                                mult=M: config.validate.folded gives it that cell's identity)
    exact-one (--exact-one)     mult=M, and per layer L the rules [{match: L, mult: native}]; the ends: [] (all M,
                                the reference) and, for a single M, [{match: all, mult: native}] (the native cell)

For LeNet-5 and one multiplier that is 5 + 2 cells; for ResNet-18's 21 layers, 23. `--layers SELECTOR` (repeated)
limits the cells to the layers it picks (e.g. `--layers '*conv*'`); the ends stay. report.sensitivity finds the study
in the runs and draws it.
"""
from __future__ import annotations

from typing import Sequence

from orchestrator.explore.grid import Study, StudyError, layers_choice, rule

APPROXIMATE_ONE, EXACT_ONE = "approximate-one", "exact-one"


def overrides(study: Study, kind: str = APPROXIMATE_ONE, selectors: Sequence[str] = ()) -> list[str]:
    """launch.py's overrides of the study's grid (see the module's doc)."""
    layers = study.layers(selectors)
    grads = study.exact_gradients
    if kind == APPROXIMATE_ONE:
        assignments: list[list[dict]] = [[]]
        for mult in study.mults:
            assignments.append([rule("all", mult, grads)])
            assignments += [[rule(layer, mult, grads)] for layer in layers]
        return [f"model={study.model}", "mult=native", layers_choice(assignments), *study.overrides]
    if kind != EXACT_ONE:
        raise ValueError(f"kind={kind!r}: {APPROXIMATE_ONE} or {EXACT_ONE}")
    assignments = [[]] + [[rule(layer, "native")] for layer in layers]
    if len(study.mults) == 1:  # with several, every M's [all -> native] would be the one native cell, launched twice
        assignments.insert(1, [rule("all", "native")])
    mults = ",".join(_mult_override(m) for m in study.mults)
    return [f"model={study.model}", f"mult={mults}", *(_table_override(study.mults)),
            f"mult.exact_gradients={str(grads).lower()}", layers_choice(assignments), *study.overrides]


def _mult_override(spec: str) -> str:
    return "lut" if spec.startswith("lut:") else spec


def _table_override(specs: Sequence[str]) -> list[str]:
    tables = [s[len("lut:"):] for s in specs if s.startswith("lut:")]
    if tables and len(specs) > 1:
        raise StudyError("an exact-one study of a table takes that table alone (mult.table has one value per "
                         "launch): run one study per table")
    return [f"mult.table={tables[0]}"] if tables else []
