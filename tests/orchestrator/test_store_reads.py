"""The report's and status's SQL reads of a store (orchestrator.tracking.reads) against MLflow's own API, on a real
SQLite store written by MLflow: the same runs in the same order (newest first; empty, missing and deleted identity
tags, other experiments left out), the same tags, params and latest metrics, and the same metric histories in the
same order for steps logged twice, NaN and infinity, runs missing a key or every metric; the report's rows and
learning curves the same through either."""
from __future__ import annotations

import math
import sqlite3

import pytest

from orchestrator.report import histories, table as report
from orchestrator.tracking import reads as store_reads
from orchestrator.report.table import Row
from orchestrator.tracking.reads import api_cell_runs, api_histories, cell_runs, read_histories
from orchestrator.tracking.tracker import FINAL_KEY, TAG_CELL

KEYS = ("epoch", "test_accuracy", "loss")
T0 = 1_700_000_000_000  # ms
MAX_FLOAT = 1.7976931348623157e308


def comparable(found: dict) -> dict:
    """NaN != NaN: written as a string so that whole histories compare with ==."""
    return {run: {key: [(step, "nan" if math.isnan(v) else v) for step, v in values] for key, values in h.items()}
            for run, h in found.items()}


def nan_free(value):
    return "nan" if isinstance(value, float) and math.isnan(value) else value


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Three seeds of one cell (A, B, C; A also has an older run, A0), a run of another cell (D), one with no metrics
    (E), and runs that are not cells of the experiment: an empty identity tag (F), none (G), deleted (H), another
    experiment's (I)."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment, other = client.create_experiment("amdnn"), client.create_experiment("other")
    cells = {"A": "a" * 64, "A0": "a" * 64, "B": "b" * 64, "C": "c" * 64, "D": "d" * 64, "E": "e" * 64, "F": "",
             "H": "h" * 64, "I": "i" * 64}
    runs = {}
    for n, name in enumerate(["A0", "A", "B", "C", "D", "E", "F", "G", "H", "I"]):
        tags = {"amdnn.model": "lenet300", "amdnn.seed": str(n)} | ({TAG_CELL: cells[name]} if name in cells else {})
        start = T0 + 1000 * min(n, 4)   # D to I start at one time: run ids break the tie
        runs[name] = client.create_run(other if name == "I" else experiment, start_time=start, tags=tags).info.run_id
        client.log_param(runs[name], "train.epochs", str(10 + n))
    client.delete_run(runs["H"])

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
    for name, final in (("A", 0.8), ("B", 0.85), ("C", float("nan"))):
        client.log_metric(runs[name], FINAL_KEY, final, timestamp=T0 + 50, step=300)
        client.set_terminated(runs[name], "FINISHED" if name != "C" else "FAILED")
    return uri, runs


def test_cell_runs_are_what_search_runs_finds(store):
    uri, runs = store
    fast, api = cell_runs(uri, "amdnn"), api_cell_runs(uri, "amdnn")
    names = {run_id: name for name, run_id in runs.items()}
    tied = sorted(["D", "E", "F", "G"], key=runs.get)
    assert [names[r.run_id] for r in fast] == [names[r.run_id] for r in api] \
        == [n for n in tied if n in ("D", "E")] + ["C", "B", "A", "A0"]   # newest first, then by run id
    for f, a in zip(fast, api):
        assert (f.run_id, f.status, f.tags, f.params) == (a.run_id, a.status, a.tags, a.params)
        assert {k: nan_free(v) for k, v in f.metrics.items()} == {k: nan_free(v) for k, v in a.metrics.items()}
    by_name = {names[r.run_id]: r for r in fast}
    assert by_name["A"].tags[TAG_CELL] == by_name["A0"].tags[TAG_CELL] == "a" * 64
    assert by_name["A"].metrics == {"epoch": 3.0, "test_accuracy": 0.8, "loss": 0.5, "lr": 0.1, FINAL_KEY: 0.8}
    assert (by_name["C"].status, math.isnan(by_name["C"].metrics[FINAL_KEY])) == ("FAILED", True)
    assert by_name["B"].params == {"train.epochs": "12"} and by_name["E"].status == "RUNNING"
    assert cell_runs(uri, "no such experiment") == api_cell_runs(uri, "no such experiment") == []


def test_report_rows_are_the_same_through_either_path(store, monkeypatch):
    uri, runs = store
    fast = report.collect(uri, "amdnn")
    assert {r.run_id for r in fast} == {runs[n] for n in "ABCDE"}   # the newest run of A's identity
    assert [r.test_accuracy for r in fast if r.run_id in (runs["A"], runs["B"])] == [0.85, 0.8]
    monkeypatch.setattr(report, "cell_runs", api_cell_runs)
    assert repr(report.collect(uri, "amdnn")) == repr(fast)


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
    with store_reads._snapshot(f"sqlite:///{db}") as conn:
        assert conn is None


def test_grid_curves_are_the_same_through_either_path(store, monkeypatch):
    uri, runs = store
    rows = [Row(f"{name}-identity", "lenet300", mult, "digits", str(seed), "FINISHED", 0.9, runs[name])
            for name, mult, seed in (("A", "am16", 0), ("B", "am16", 1), ("C", "am16", 2), ("D", "native", 0),
                                     ("E", "acc32", 0))]
    fast = histories.grid_curves(uri, rows)["digits"]["lenet300"]
    assert set(fast) == {"am16"}  # D lacks the loss, E every metric: no curve
    # the epochs all three seeds reached, each the mean of the last values logged (B's epoch 1 loss is NaN)
    assert fast["am16"].partial == []
    (e1, acc1, loss1, *_), (e2, acc2, loss2, *_) = fast["am16"].mean
    assert (e1, e2) == (1, 2) and math.isnan(loss1)
    assert loss2 == pytest.approx((0.9 + MAX_FLOAT + 1.1) / 3, rel=1e-15)  # MLflow keeps inf as the largest float
    assert acc1 == pytest.approx((0.5 + 0.6 + 0.4) / 3, abs=1e-15)
    assert acc2 == pytest.approx((0.75 + 0.9 + 0.6) / 3, abs=1e-15)
    monkeypatch.setattr(histories, "read_histories", api_histories)
    assert repr(histories.grid_curves(uri, rows)["digits"]["lenet300"]) == repr(fast)


def test_status_progress_is_the_same_through_either_path(store, monkeypatch):
    from orchestrator.cluster import status

    uri, runs = store
    records = [{"tracking_uri": uri, "experiment": "amdnn", "identity": i} for i in ("a" * 64, "c" * 64, "e" * 64)]
    fast = status.progress(records)
    assert fast["a" * 64] == {"epoch": 3.0, "test_accuracy": 0.8, "run_id": runs["A"], "run_status": "FINISHED"}
    assert fast["e" * 64] == {"epoch": None, "test_accuracy": None, "run_id": runs["E"], "run_status": "RUNNING"}
    monkeypatch.setattr(store_reads, "cell_runs", api_cell_runs)
    assert status.progress(records) == fast


def test_a_journal_left_by_a_killed_writer_is_read_through_the_api(tmp_path):
    """A read-only connection cannot roll back a hot journal; MLflow's can, and the values read are the committed."""
    import os
    import signal
    import subprocess
    import sys

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    client = MlflowClient(uri)
    run = client.create_run(client.create_experiment("amdnn"), tags={TAG_CELL: "a" * 64}).info.run_id
    for start in range(0, 3000, 1000):  # enough pages for the writer below to spill changes into the file
        client.log_batch(run, metrics=[Metric("loss", step / 3000, T0, step) for step in range(start, start + 1000)])
    writer = subprocess.Popen([sys.executable, "-c", f"""
import sqlite3, time
conn = sqlite3.connect({str(db)!r}, isolation_level=None)
conn.execute("PRAGMA cache_size = 2")  # pages: the update spills into the database file before any commit
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE metrics SET value = value + 1")
print("updated", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "updated"
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    assert (tmp_path / "mlflow.db-journal").exists()
    with pytest.raises(sqlite3.OperationalError):
        with store_reads._snapshot(uri) as conn:
            conn.execute("SELECT count(*) FROM metrics").fetchone()
    assert read_histories(uri, [run], ["loss"]) == {run: {"loss": [(step, step / 3000) for step in range(3000)]}}
    assert [r.run_id for r in cell_runs(uri, "amdnn")] == [run]
