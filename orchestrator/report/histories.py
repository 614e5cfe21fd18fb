"""Per-epoch curves read back from MLflow: the metrics every cell logs at each epoch end (orchestrator.cell.trainer).

    epoch_history(history)              [(epoch, test accuracy, loss), ...] of one run, in epoch order, from its
                                        metric histories (tracking.reads.read_histories)
    mean_curve(histories)               the finished seeds' mean and standard deviation, epoch by epoch
    grid_curves(uri, rows)              {dataset: {model: {column label: CellCurves}}}, laid out as the tables

A table cell's curve is the mean of its finished seeds, with their spread; a seed that has not finished (running,
killed, failed) is its own partial curve, never averaged in, so that a curve never drops where a run stopped.

An epoch's metrics share one step (the global step at its end), so the "epoch" metric names each step's epoch; a run
that rolled back past an epoch logged it once (the tracker logs a step only once). Where a step holds several
values, the last in MLflow's order counts.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Mapping, Sequence

from orchestrator.report.table import Row, grids
from orchestrator.tracking.reads import History, read_histories
from orchestrator.tracking.writer import EPOCH_KEY

CURVE_KEYS = ("test_accuracy", "loss")   # in the order of the curves' points after the epoch

# (epoch, mean test accuracy, mean loss, their standard deviations (NaN below two seeds), seeds averaged)
MeanPoint = tuple[int, float, float, float, float, int]


@dataclass
class CellCurves:
    mult: str                                               # the multiplier label: the curves' colour
    mean: list[MeanPoint] = field(default_factory=list)   # over the finished seeds
    # (seed, MLflow status, [(epoch, test accuracy, loss)]) of each seed with epochs logged that has not finished
    partial: list[tuple[str, str, list[tuple[int, float, float]]]] = field(default_factory=list)


def epoch_history(history: Mapping[str, Sequence[tuple[int, float]]]) -> list[tuple[int, float, float]]:
    """One run's (epoch, test accuracy, training loss) in epoch order, by the epoch metric of each step that logged
    all three. Tuples, not dicts: 200,000 epochs of a 1000-cell grid cost 0.4 s as dicts, 0.15 s as tuples."""
    epochs = dict(history.get(EPOCH_KEY, ()))
    accuracy, loss = (dict(history.get(key, ())) for key in CURVE_KEYS)
    steps = sorted(epochs.keys() & accuracy.keys() & loss.keys())
    return sorted([(int(epochs[step]), accuracy[step], loss[step]) for step in steps], key=itemgetter(0))


def _std(values: list[float], mean: float) -> float:
    """The sample standard deviation of values whose mean is `mean`, NaN below two values. By hand: statistics.stdev
    raises where a diverged run logged a NaN or a huge loss, which must give a NaN or infinite band instead, and
    numpy's costs 10 us a call (0.8 s over 1000 seeds x 200 epochs) against 1 us."""
    if len(values) < 2:
        return math.nan
    try:
        return math.sqrt(math.fsum([(v - mean) ** 2 for v in values]) / (len(values) - 1))
    except OverflowError:
        return math.inf


def mean_curve(histories: Sequence[list[tuple[int, float, float]]]) -> list[MeanPoint]:
    """(epoch, mean test accuracy, mean loss, their standard deviations, n) over the runs, at each epoch every one
    of them has reached."""
    if not histories:
        return []
    by_epoch = [{point[0]: point for point in history} for history in histories]
    common = sorted(set.intersection(*(set(b) for b in by_epoch)))
    out = []
    for epoch in common:
        # fmean of a list: one fsum, without the generator's counting wrapper (0.2 s over 1000 seeds x 200 epochs)
        accuracy, loss = [b[epoch][1] for b in by_epoch], [b[epoch][2] for b in by_epoch]
        mean_accuracy, mean_loss = statistics.fmean(accuracy), statistics.fmean(loss)
        out.append((epoch, mean_accuracy, mean_loss, _std(accuracy, mean_accuracy), _std(loss, mean_loss),
                    len(by_epoch)))
    return out


def cell_curves(runs: Sequence[Row], histories: Mapping[str, History]) -> CellCurves:
    finished, partial = [], []
    for r in runs:
        points = epoch_history(histories.get(r.run_id, {})) if r.run_id else []
        if not points:
            continue
        if r.status == "FINISHED":
            finished.append(points)
        else:
            partial.append((r.seed, r.status, points))
    return CellCurves(runs[0].mult, mean_curve(finished), sorted(partial))


def grid_curves(uri: str, rows: Sequence[Row]) -> dict[str, dict[str, dict[str, CellCurves]]]:
    """The curves of every table cell with a run, laid out as the report's tables (the same labels); the histories
    of all runs read at once."""
    layout = grids(rows)
    run_ids = [r.run_id for _, _, body in layout for _, cells in body for runs in cells for r in runs if r.run_id]
    histories: dict[str, History] = read_histories(uri, run_ids, (EPOCH_KEY, *CURVE_KEYS))
    out: dict[str, dict[str, dict[str, CellCurves]]] = {}
    for dataset, columns, body in layout:
        per_model: dict[str, dict[str, CellCurves]] = defaultdict(dict)
        for row, cells in body:
            for column, runs in zip(columns, cells):
                curves = cell_curves(runs, histories) if runs else None
                if curves and (curves.mean or curves.partial):
                    per_model[row][column] = curves
        out[dataset] = dict(per_model)
    return out
