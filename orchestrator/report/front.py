"""The accuracy-cost front: per data set and model, every experiment of the results table (a cell: its finished
seeds' mean final test accuracy) against its relative multiplication energy, the Pareto-optimal ones marked.

A cell's cost is what its runs logged at step 0 (orchestrator.cell.artifacts): the relative multiplication energy
(ENERGY_KEY: the sum over layers of MACs x the layer multiplier's energy per multiply relative to the exact one, over
the network's MACs), or the relative power (POWER_KEY, the same sum of power: at one multiply rate, energy per
multiply scales as power; EvoApproxLib publishes power, not energy), whichever places more of the panel's cells
(energy on a tie). A cell whose multipliers have no figure of the panel's kind is listed apart, never placed.

A cell is Pareto-optimal when no other cell of its panel is at least as accurate and at most as costly, and better in
one of the two: the cells a designer chooses among.

    fronts(rows)             one Front per (data set, model) with two finished cells or more that have a cost figure
    markdown(found), to_csv(found)
"""
from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass
from typing import Sequence

from orchestrator.report.table import Row, finished_accuracies, grids

FIGURES = ("energy", "power")   # the cost axis: the one more of a panel's cells have (energy on a tie)


@dataclass(frozen=True)
class Point:
    label: str          # the cell's column label: its multiplier and the settings that tell it apart
    mult: str           # the multiplier label (its colour in the figures)
    accuracy: float     # mean final test accuracy of the finished seeds
    seeds: int
    cost: float         # relative multiplication energy (or power: Front.figure)
    optimal: bool       # on the Pareto front of its panel


@dataclass(frozen=True)
class Front:
    dataset: str
    model: str                      # the table's row label
    figure: str                     # "energy" or "power"
    points: tuple[Point, ...]       # by cost, then accuracy (highest first)
    without: tuple[str, ...]        # finished cells without a figure of this kind

    @property
    def optimal(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.optimal)


def _cost(runs: Sequence[Row], figure: str) -> float | None:
    values = [getattr(r, figure) for r in runs if r.status == "FINISHED" and getattr(r, figure) is not None]
    return values[0] if values else None  # every seed of a cell logs the same figure (it depends on its map only)


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """For (cost, accuracy) pairs, whether each is Pareto-optimal: no other pair is at most as costly and at least as
    accurate, and strictly better in one."""
    return [not any(c <= cost and a >= accuracy and (c < cost or a > accuracy) for c, a in points)
            for cost, accuracy in points]


def fronts(rows: Sequence[Row]) -> list[Front]:
    """The front of each data set and model (table row) with at least two finished cells that have a cost figure."""
    found = []
    for dataset, columns, body in grids(rows):
        for model, cells in body:
            done = [(column, runs) for column, runs in zip(columns, cells) if finished_accuracies(runs)]
            counts = [sum(_cost(runs, f) is not None for _, runs in done) for f in FIGURES]
            if not any(counts):
                continue
            figure = FIGURES[counts.index(max(counts))]  # the figure placing the most cells; energy on a tie
            placed = [(column, runs, _cost(runs, figure)) for column, runs in done]
            costed = [(column, runs, cost) for column, runs, cost in placed if cost is not None]
            if len(costed) < 2:
                continue  # one cell is no trade-off: the table says all there is
            means = [statistics.fmean(finished_accuracies(runs)) for _, runs, _ in costed]
            optimal = pareto([(cost, mean) for (_, _, cost), mean in zip(costed, means)])
            points = sorted((Point(column, runs[0].mult, mean, len(finished_accuracies(runs)), cost, best)
                             for (column, runs, cost), mean, best in zip(costed, means, optimal)),
                            key=lambda p: (p.cost, -p.accuracy, p.label))
            found.append(Front(dataset, model, figure, tuple(points),
                               tuple(column for column, _, cost in placed if cost is None)))
    return found


def axis_label(figure: str) -> str:
    return f"relative multiplication {figure} (exact = 1)"


def markdown(found: Sequence[Front]) -> str:
    """Per data set and model: the Pareto-optimal cells by cost, then how many cells lie behind the front."""
    if not found:
        return ""
    out = ["## Accuracy against multiplication cost", ""]
    for front in found:
        out += [f"### {front.model} on {front.dataset}: the Pareto-optimal cells", "",
                f"| # | cell | {axis_label(front.figure)} | final test accuracy | seeds |", "|---|---|---|---|---|"]
        out += [f"| {number} | {p.label} | {p.cost:.4f} | {p.accuracy:.4f} | {p.seeds} |"
                for number, p in enumerate(front.optimal, start=1)]
        behind = len(front.points) - len(front.optimal)
        out.append("")
        out.append(f"{len(front.points)} cells placed, {behind} behind the front"
                   + (f"; no {front.figure} figure for {', '.join(front.without)}" if front.without else "")
                   + ".")
        out.append("")
    return "\n".join(out).rstrip()


def to_csv(found: Sequence[Front]) -> str:
    """front.csv: one line per placed cell, its cost, accuracy and whether it is on the front."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["dataset", "model", "cell", "mult", "cost_figure", "relative_cost", "accuracy_mean", "n",
                     "pareto_optimal"])
    for front in found:
        for p in front.points:
            writer.writerow([front.dataset, front.model, p.label, p.mult, front.figure, repr(p.cost),
                             repr(p.accuracy), p.seeds, int(p.optimal)])
    return buffer.getvalue()
