"""Each table cell against its baseline, like with like: the cell of the same row whose multiplier is native (else
acc32) and whose setting is the same but for the multiplier (model, data set, recipe and its overrides, epochs,
engine: every defining key outside mult.*), paired over the seeds both have finished (report.paired).

A cell with no such baseline has no difference: an am16 run of 20 epochs is never compared with a native run of 3.

    comparisons(rows)      every cell's Comparison, in the tables' order (report.table.grids)
    markdown(found)        one table per data set: each cell against its baseline, in percentage points
    to_csv(found)          cells.csv: one line per table cell, its seeds' statistics and its comparison
"""
from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from orchestrator.report.paired import METHOD, Paired, paired, points_text
from orchestrator.report.table import Row, finished_accuracies, grids

REFERENCE_MULTS = ("native", "acc32")   # the baseline of a cell: the first of these with the cell's setting
NO_BASELINE = "no native or acc32 run of this setting: no difference shown"


@dataclass(frozen=True)
class Comparison:
    dataset: str
    row: str
    column: str
    runs: tuple[Row, ...]
    baseline: str | None                 # the baseline cell's column label, None where the cell has none
    paired: Paired | None                # None without a baseline or without a seed both finished


def comparable(setting: Mapping[str, str]) -> tuple:
    """What a cell shares with its baseline: its setting without the multiplier's own keys."""
    return tuple(sorted((k, v) for k, v in setting.items() if not k.startswith("mult.")))


def finished_by_seed(runs: Sequence[Row]) -> dict[str, float]:
    return {r.seed: r.test_accuracy for r in runs if r.status == "FINISHED" and r.test_accuracy is not None}


def baselines(cells: Sequence[Sequence[Row]]) -> list[int | None]:
    """For each cell of a table row, the index of its baseline cell in the row, or None."""
    candidates = {}
    for index, runs in enumerate(cells):
        if runs and runs[0].mult in REFERENCE_MULTS:
            candidates.setdefault((runs[0].mult, comparable(runs[0].setting)), index)
    out: list[int | None] = []
    for runs in cells:
        found = None
        if runs:
            key, own = comparable(runs[0].setting), runs[0].mult
            # native is the baseline of everything, acc32 too (against native); native has none, so the pair
            # native/acc32 is listed once, not again with its sign turned
            allowed = REFERENCE_MULTS[:REFERENCE_MULTS.index(own)] if own in REFERENCE_MULTS else REFERENCE_MULTS
            found = next((candidates[(m, key)] for m in allowed if (m, key) in candidates), None)
        out.append(found)
    return out


def comparisons(rows: Sequence[Row]) -> list[Comparison]:
    """Every table cell with a run, with its baseline and the paired comparison, in the tables' order."""
    out = []
    for dataset, columns, body in grids(rows):
        for row, cells in body:
            for column, runs, base in zip(columns, cells, baselines(cells)):
                if not runs:
                    continue
                versus = None if base is None else paired(finished_by_seed(runs), finished_by_seed(cells[base]))
                out.append(Comparison(dataset, row, column, tuple(runs), None if base is None else columns[base],
                                      versus))
    return out


def versus_text(c: Comparison) -> str:
    """The comparison of a cell in words: its paired difference in points, or why there is none."""
    if c.baseline is None:
        return NO_BASELINE
    return points_text(c.paired) if c.paired else "no seed finished by both"


def listed(found: Sequence[Comparison], dataset: str) -> list[Comparison]:
    """The cells of a data set that the comparison tables list: every one but the baselines themselves."""
    return [c for c in found if c.dataset == dataset and not (c.runs[0].mult in REFERENCE_MULTS and c.baseline is None)]


def markdown(found: Sequence[Comparison]) -> str:
    """Per data set, each cell but the baselines: the mean difference to its baseline over the shared seeds and its
    interval, or why there is none."""
    out = []
    for dataset in sorted({c.dataset for c in found}):
        lines = [f"| Against the baseline ({dataset}) | baseline | difference, {METHOD} | seeds |",
                 "|---|---|---|---|"]
        for c in listed(found, dataset):
            lines.append(f"| {c.row} × {c.column} | {c.baseline or ''} | {versus_text(c)} | "
                         f"{', '.join(c.paired.seeds) if c.paired else ''} |")
        if len(lines) > 2:
            out.append("\n".join(lines))
    return "\n\n".join(out)


def _number(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else repr(value)


CSV_HEADER = ["dataset", "row", "column", "model", "mult", "setting", "seeds_finished", "n", "mean", "std",
              "baseline", "paired_seeds", "pairs", "mean_difference", "std_difference", "ci_low", "ci_high",
              "interval"]


def to_csv(found: Sequence[Comparison]) -> str:
    """One line per table cell with a run: its finished seeds' mean, standard deviation and count, and against its
    baseline (empty where it has none) the paired mean difference, its standard deviation and confidence interval,
    all as fractions of 1 like the accuracies."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_HEADER)
    for c in found:
        done = finished_accuracies(c.runs)
        seeds = sorted(finished_by_seed(c.runs))
        p = c.paired
        writer.writerow([c.dataset, c.row, c.column, c.runs[0].model, c.runs[0].mult,
                         json.dumps(c.runs[0].setting, sort_keys=True), " ".join(seeds), len(done),
                         _number(statistics.fmean(done) if done else None),
                         _number(statistics.stdev(done) if len(done) > 1 else None), c.baseline or "",
                         " ".join(p.seeds) if p else "", p.n if p else "", _number(p.mean if p else None),
                         _number(p.std if p else None), _number(p.low if p else None),
                         _number(p.high if p else None), METHOD if p and p.n > 1 else ""])
    return buffer.getvalue()
