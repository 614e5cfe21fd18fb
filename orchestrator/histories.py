"""Per-epoch curves read back from MLflow: the metrics every cell logs at each epoch end (orchestrator.trainer).

    epoch_history(client, run_id)       [{"epoch", "test_accuracy", "loss"}, ...] of one run, in epoch order
    grid_curves(uri, rows)              {dataset: {model: {multiplier label: [(epoch, test acc, loss)]}}}, the
                                        seeds of one table cell averaged epoch by epoch

An epoch's metrics share one step (the global step at its end), so the "epoch" metric names each step's epoch; a run
that rolled back past an epoch logged it once (the tracker logs a step only once).
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Sequence

from .report import Row, grids

CURVE_KEYS = ("test_accuracy", "loss")


def epoch_history(client, run_id: str) -> list[dict]:
    """One run's per-epoch test accuracy and training loss, by the epoch metric of each step."""
    epochs = {m.step: m.value for m in client.get_metric_history(run_id, "epoch")}
    values = {key: {m.step: m.value for m in client.get_metric_history(run_id, key)} for key in CURVE_KEYS}
    out = [{"epoch": int(epochs[step]), **{key: values[key][step] for key in CURVE_KEYS}}
           for step in sorted(epochs) if all(step in values[key] for key in CURVE_KEYS)]
    return sorted(out, key=lambda h: h["epoch"])


def mean_curve(histories: Sequence[list[dict]]) -> list[tuple[float, float, float]]:
    """(epoch, mean test accuracy, mean loss) over the runs, at each epoch every one of them has reached."""
    if not histories:
        return []
    by_epoch = [{h["epoch"]: h for h in history} for history in histories]
    common = sorted(set.intersection(*(set(b) for b in by_epoch)))
    return [(epoch, statistics.fmean(b[epoch]["test_accuracy"] for b in by_epoch),
             statistics.fmean(b[epoch]["loss"] for b in by_epoch)) for epoch in common]


def grid_curves(uri: str, rows: Sequence[Row]) -> dict[str, dict[str, dict[str, list]]]:
    """The curves of every table cell with a run, laid out as the report's tables (the same labels)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    out: dict[str, dict[str, dict[str, list]]] = {}
    for dataset, columns, body in grids(rows):
        per_model: dict[str, dict[str, list]] = defaultdict(dict)
        for row, cells in body:
            for column, runs in zip(columns, cells):
                histories = [epoch_history(client, r.run_id) for r in runs if r.run_id]
                histories = [h for h in histories if h]
                if histories:
                    per_model[row][column] = mean_curve(histories)
        out[dataset] = dict(per_model)
    return out
