"""The report's one-query read of metric histories (orchestrator.metric_histories) against MLflow's own API, on a real
SQLite store written by MLflow: the same values, in the same order, for steps logged twice, NaN and infinity, runs
missing a key or every metric, and the learning curves drawn from them."""
from __future__ import annotations

import math
import sqlite3

import pytest

from orchestrator import histories, metric_histories
from orchestrator.metric_histories import api_histories, read_histories
from orchestrator.report import Row

KEYS = ("epoch", "test_accuracy", "loss")
T0 = 1_700_000_000_000  # ms
MAX_FLOAT = 1.7976931348623157e308


def comparable(found: dict) -> dict:
    """NaN != NaN: written as a string so that whole histories compare with ==."""
    return {run: {key: [(step, "nan" if math.isnan(v) else v) for step, v in values] for key, values in h.items()}
            for run, h in found.items()}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store with three seeds of one cell (A, B, C), a run of another cell (D) and one with no metrics (E)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("amdnn")
    runs = {name: client.create_run(experiment).info.run_id for name in "ABCDE"}

    def epochs(run, values, t=T0):  # {epoch: (test accuracy, loss)}, step 100 per epoch
        client.log_batch(runs[run], metrics=[Metric(k, v, t + e, 100 * e) for e, (acc, loss) in values.items()
                                             for k, v in (("epoch", float(e)), ("test_accuracy", acc), ("loss", loss),
                                                          ("lr", 0.1))])

    epochs("A", {1: (0.5, 2.0), 2: (0.7, 1.0), 3: (0.8, 0.5)})
    epochs("A", {2: (0.75, 0.9)}, t=T0 + 10)             # epoch 2 again, later: the last value counts
    client.log_batch(runs["A"], metrics=[Metric("loss", 0.3, T0 + 2, 200)])  # same step, between the two
    epochs("B", {1: (0.6, float("nan")), 2: (0.9, float("inf")), 3: (0.85, 0.4)})
    epochs("C", {1: (0.4, 1.5), 2: (0.6, 1.1)})          # one epoch fewer
    client.log_batch(runs["D"], metrics=[Metric("epoch", 1.0, T0, 100), Metric("test_accuracy", 0.2, T0, 100)])
    return uri, runs


def test_one_query_reads_what_the_api_reads(store):
    uri, runs = store
    ids = list(runs.values())
    fast = read_histories(uri, ids, KEYS)
    assert comparable(fast) == comparable(api_histories(uri, ids, KEYS))
    a, b, d = fast[runs["A"]], fast[runs["B"]], fast[runs["D"]]
    # MLflow's order: by timestamp, then step, then value (0.3 and 1.0 share a timestamp and step)
    assert a["loss"] == [(100, 2.0), (200, 0.3), (200, 1.0), (300, 0.5), (200, 0.9)]
    assert a["test_accuracy"] == [(100, 0.5), (200, 0.7), (300, 0.8), (200, 0.75)]
    assert math.isnan(b["loss"][0][1]) and b["loss"][1:] == [(200, MAX_FLOAT), (300, 0.4)]
    assert set(d) == {"epoch", "test_accuracy"} and runs["E"] not in fast
    assert read_histories(uri, [], KEYS) == {}


def test_a_reader_is_not_held_by_a_writer_and_sees_only_committed_rows(store):
    uri, runs = store
    writer = sqlite3.connect(uri[len("sqlite:///"):], isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")   # an importer between its inserts and its commit
    writer.execute("INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES "
                   "('loss', 9.0, ?, ?, 400, 0)", (T0 + 99, runs["C"]))
    try:
        assert read_histories(uri, [runs["C"]], ["loss"]) == {runs["C"]: {"loss": [(100, 1.5), (200, 1.1)]}}
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_table_mlflow_does_not_write_is_left_to_the_api(tmp_path):
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE metrics (key TEXT, value REAL)")
    assert metric_histories._sqlite_histories(db, ["x"], KEYS) is None


def test_grid_curves_are_the_same_through_either_path(store, monkeypatch):
    uri, runs = store
    rows = [Row(f"{name}-identity", "lenet300", mult, "digits", str(seed), "FINISHED", 0.9, runs[name])
            for name, mult, seed in (("A", "am16", 0), ("B", "am16", 1), ("C", "am16", 2), ("D", "native", 0),
                                     ("E", "acc32", 0))]
    fast = histories.grid_curves(uri, rows)["digits"]["lenet300"]
    assert set(fast) == {"am16"}  # D lacks the loss, E every metric: no curve
    # the epochs all three seeds reached, each the mean of the last values logged (B's epoch 1 loss is NaN)
    (e1, acc1, loss1), (e2, acc2, loss2) = fast["am16"]
    assert (e1, e2) == (1, 2) and math.isnan(loss1)
    assert loss2 == pytest.approx((0.9 + MAX_FLOAT + 1.1) / 3, rel=1e-15)  # MLflow keeps inf as the largest float
    assert acc1 == pytest.approx((0.5 + 0.6 + 0.4) / 3, abs=1e-15)
    assert acc2 == pytest.approx((0.75 + 0.9 + 0.6) / 3, abs=1e-15)
    monkeypatch.setattr(histories, "read_histories", api_histories)
    assert repr(histories.grid_curves(uri, rows)["digits"]["lenet300"]) == repr(fast)
