"""Per-epoch curves read back from MLflow: the metrics every cell logs at each epoch end (orchestrator.cell.trainer).

    epoch_history(history)              [(epoch, test accuracy, loss), ...] of one run, in epoch order, from its
                                        metric histories (tracking.reads.read_histories)
    grid_curves(uri, rows)              {dataset: {model: {multiplier label: [(epoch, test acc, loss)]}}}, the
                                        seeds of one table cell averaged epoch by epoch

An epoch's metrics share one step (the global step at its end), so the "epoch" metric names each step's epoch; a run
that rolled back past an epoch logged it once (the tracker logs a step only once). Where a step holds several
values, the last in MLflow's order counts.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from operator import itemgetter
from typing import Mapping, Sequence

from orchestrator.report.table import Row, grids
from orchestrator.tracking.reads import History, read_histories
from orchestrator.tracking.writer import EPOCH_KEY

CURVE_KEYS = ("test_accuracy", "loss")   # in the order of the curves' points after the epoch


def epoch_history(history: Mapping[str, Sequence[tuple[int, float]]]) -> list[tuple[int, float, float]]:
    """One run's (epoch, test accuracy, training loss) in epoch order, by the epoch metric of each step that logged
    all three. Tuples, not dicts: 200,000 epochs of a 1000-cell grid cost 0.4 s as dicts, 0.15 s as tuples."""
    epochs = dict(history.get(EPOCH_KEY, ()))
    accuracy, loss = (dict(history.get(key, ())) for key in CURVE_KEYS)
    steps = sorted(epochs.keys() & accuracy.keys() & loss.keys())
    return sorted([(int(epochs[step]), accuracy[step], loss[step]) for step in steps], key=itemgetter(0))


def mean_curve(histories: Sequence[list[tuple[int, float, float]]]) -> list[tuple[float, float, float]]:
    """(epoch, mean test accuracy, mean loss) over the runs, at each epoch every one of them has reached."""
    if not histories:
        return []
    by_epoch = [{point[0]: point for point in history} for history in histories]
    common = sorted(set.intersection(*(set(b) for b in by_epoch)))
    # fmean of a list: one fsum, without the generator's counting wrapper (0.2 s over 1000 seeds x 200 epochs)
    return [(epoch, statistics.fmean([b[epoch][1] for b in by_epoch]), statistics.fmean([b[epoch][2] for b in by_epoch]))
            for epoch in common]


def grid_curves(uri: str, rows: Sequence[Row]) -> dict[str, dict[str, dict[str, list]]]:
    """The curves of every table cell with a run, laid out as the report's tables (the same labels); the histories
    of all runs read at once."""
    layout = grids(rows)
    run_ids = [r.run_id for _, _, body in layout for _, cells in body for runs in cells for r in runs if r.run_id]
    histories: dict[str, History] = read_histories(uri, run_ids, (EPOCH_KEY, *CURVE_KEYS))
    out: dict[str, dict[str, dict[str, list]]] = {}
    for dataset, columns, body in layout:
        per_model: dict[str, dict[str, list]] = defaultdict(dict)
        for row, cells in body:
            for column, runs in zip(columns, cells):
                found = [epoch_history(histories.get(r.run_id, {})) for r in runs if r.run_id]
                found = [h for h in found if h]
                if found:
                    per_model[row][column] = mean_curve(found)
        out[dataset] = dict(per_model)
    return out
