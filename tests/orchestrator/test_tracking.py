"""MLflow tracking: a tracking outage never kills training and loses nothing; 16 writers share one SQLite store."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.orchestrator.helpers import PYTHON, TINY, env, run_data, runs_of_experiment


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once closed: connections are refused


def test_server_down_training_finishes_and_records_are_flushed_later(workdir):
    from orchestrator.cell.run import run_cell

    down = f"http://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    result = run_cell(workdir.cfg(*TINY, f"tracking_uri={down}", "tracking_patience_s=1"), supervise=False)
    assert result.status == "finished" and result.run_id is None
    assert time.monotonic() - t0 < 60  # bounded retries, no minutes of HTTP back-off
    queue = Path(result.cell_dir) / "tracking-queue.jsonl"
    records = [json.loads(l) for l in queue.read_text().splitlines()]
    assert records[0]["op"] == "start" and records[-1]["op"] == "end"
    metrics = [sorted(r["metrics"]) for r in records if r["op"] == "metrics"]
    # the multiplier's relative energy and power (step 0), 2 epochs, the final accuracy
    assert len(metrics) == 4 and metrics[0] == ["mult_relative_energy", "mult_relative_power"]
    assert metrics[-1] == ["final_test_accuracy"]

    # Later (the server is back, or the store is another one): launching the finished cell again trains nothing
    # and sends everything that was kept.
    again = run_cell(workdir.cfg(*TINY), supervise=False)
    assert again.skipped and again.status == "finished" and again.run_id
    data = run_data(workdir.uri, again.run_id)
    assert data["status"] == "FINISHED"
    assert [s for s, _ in data["metrics"]["epoch"]] == [44, 88]
    for key in ("loss", "accuracy", "test_accuracy", "lr", "epoch_time_s", "eval_time_s", "images_per_s"):
        assert len(data["metrics"][key]) == 2, key
    assert data["metrics"]["final_test_accuracy"][0][1] == result.test_accuracy
    assert data["params"]["model.name"] == "lenet300" and data["params"]["train.epochs"] == "2"
    assert queue.read_text() == ""
    # The run's artifacts (curves, multiplier map) live beside the store, not under whichever folder the creating
    # process ran in.
    from mlflow.tracking import MlflowClient

    store = Path(workdir.uri[len("sqlite:///"):])
    run = MlflowClient(workdir.uri).get_run(again.run_id)
    assert Path(run.info.artifact_uri.removeprefix("file://")).is_relative_to(store.parent / "mlruns")


def test_locked_store_does_not_stop_training(workdir):
    import orchestrator.cell.trainer  # noqa: F401 - TensorFlow imported before the clock starts
    from orchestrator.cell.run import run_cell
    from orchestrator.tracking.writer import StoreWriter

    StoreWriter(workdir.uri).client()  # create the schema first
    db = sqlite3.connect(str(workdir.path / "mlflow.db"), timeout=0, isolation_level=None, check_same_thread=False)
    db.execute("BEGIN EXCLUSIVE")  # nobody else can read or write until released
    released = []
    release = threading.Timer(15.0, lambda: (db.rollback(), released.append(time.time())))
    release.start()
    try:
        result = run_cell(workdir.cfg(*TINY, "tracking_patience_s=60"), supervise=False)
    finally:
        release.join()
    assert result.status == "finished"
    last_checkpoint = max((Path(result.cell_dir) / "checkpoints").glob("step-*.json"))
    assert last_checkpoint.stat().st_mtime < released[0]  # training did not wait for the store
    data = run_data(workdir.uri, result.run_id)
    assert data["status"] == "FINISHED" and [s for s, _ in data["metrics"]["epoch"]] == [44, 88]


CELL_SCRIPT = """
import sys, time
from pathlib import Path
from orchestrator.tracking.tracker import Tracker
uri, root, index, start = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
tracker = Tracker(uri, "amdnn", f"{index:064d}", root / f"cell{index}", run_name=f"cell{index}")
time.sleep(max(0.0, start - time.time()))  # all 16 hit the store at the same moment
tracker.start({"seed": str(index)}, {"amdnn.model": "m", "amdnn.mult": "x", "amdnn.dataset": "d",
                                     "amdnn.seed": str(index)})
tracker.flush(patience_s=60)
for epoch in range(1, EPOCHS + 1):
    tracker.log_epoch(epoch * 10, {"epoch": epoch, "loss": 1.0 / epoch + index, "accuracy": epoch / 100,
                                   "test_accuracy": index / 100, "lr": 0.1, "epoch_time_s": 0.1})
    tracker.flush(patience_s=60, force=True)
tracker.log_metrics(EPOCHS * 10, {"final_test_accuracy": index / 100}, check="final_test_accuracy")
tracker.end("FINISHED")
assert tracker.flush(patience_s=120, force=True), "records left queued"
print("ok", index)
"""
EPOCHS = 4
TRAINING_CELLS = 4


@pytest.mark.slow
def test_16_cells_at_once_on_one_sqlite_store(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    start = time.time() + 8  # after every process has imported MLflow
    procs = [subprocess.Popen([PYTHON, "-c", CELL_SCRIPT.replace("EPOCHS", str(EPOCHS)), uri, str(tmp_path),
                               str(i), str(start)], env=env(), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(16)]
    outputs = [p.communicate(timeout=240)[0] for p in procs]
    for i, (p, out) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0 and f"ok {i}" in out, out[-2000:]
    runs = runs_of_experiment(uri)
    assert len(runs) == 16
    for run in runs:
        index = int(run.data.params["seed"])
        data = run_data(uri, run.info.run_id)
        assert data["status"] == "FINISHED"
        assert [s for s, _ in data["metrics"]["epoch"]] == [10 * e for e in range(1, EPOCHS + 1)]
        assert [v for _, v in data["metrics"]["loss"]] == [1.0 / e + index for e in range(1, EPOCHS + 1)]
        assert data["metrics"]["final_test_accuracy"] == [(EPOCHS * 10, index / 100)]



def test_a_send_while_another_process_appends_leaves_the_queue_whole(tmp_path):
    """While the training process appends (another_appends), its supervisor's send moves the queue's offset and
    leaves the file whole: only the appender may empty it (a truncation between its size check and an append would
    drop that record). Once the supervisor is the appender again, a send empties the queue."""
    from orchestrator.tracking.tracker import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "amdnn", "0" * 64, tmp_path / "cell", run_name="cell")
    tracker.start({"seed": "0"}, {"amdnn.model": "m", "amdnn.mult": "x", "amdnn.dataset": "d", "amdnn.seed": "0"})
    tracker.log_epoch(10, {"epoch": 1, "loss": 0.5})
    tracker.another_appends = True
    size = tracker.queue_path.stat().st_size
    assert tracker.flush(patience_s=60, force=True)
    assert tracker.queue_path.stat().st_size == size and tracker.queue.sent_offset() == size
    tracker.log_epoch(20, {"epoch": 2, "loss": 0.25})
    tracker.another_appends = False
    assert tracker.flush(patience_s=60, force=True)
    assert tracker.queue_path.stat().st_size == 0 and tracker.queue.sent_offset() == 0
    data = run_data(uri, tracker.run_id)
    assert [(s, v) for s, v in data["metrics"]["loss"]] == [(10, 0.5), (20, 0.25)]


@pytest.mark.slow
def test_training_cells_at_once_on_one_sqlite_store(tmp_path, monkeypatch):
    """Real (tiny) trainings side by side, each a run_cell in its own process: a cell's own writes (its run, params,
    every epoch, the final metrics) under contention. Four: the 16-writer load is the test above's, through the same
    Tracker; 16 trainings cost 330 CPU seconds of the suite's 3,700 on CI's 2 cores, 4 about 85. The training
    processes only queue: their supervisors send, and no training process loads MLflow (~5 CPU s of its start), nor
    scikit-learn or pandas (~1.5 CPU s)."""
    from bench.suite_cpu import HOOK  # each process says at exit what it loaded
    from tests.orchestrator.helpers import result_of, run_cell_process

    hook, loaded = tmp_path / "hook", tmp_path / "loaded.jsonl"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK.replace("LOG", repr(str(loaded))))
    monkeypatch.setenv("PYTHONPATH", str(hook) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    overrides = [f"checkpoint_root={tmp_path / 'ck'}", f"tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", *TINY,
                 "train.epochs=1", "tracking_patience_s=120"]
    procs = [run_cell_process([*overrides, f"seed={i}"], cwd=tmp_path, log=tmp_path / f"run{i}.log")
             for i in range(TRAINING_CELLS)]
    for p in procs:
        p.wait(timeout=900)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    for i in range(TRAINING_CELLS):
        result = result_of((tmp_path / f"run{i}.log").read_text())
        assert result["status"] == "finished"
        data = run_data(uri, result["run_id"])
        assert data["status"] == "FINISHED" and [s for s, _ in data["metrics"]["epoch"]] == [44]
        # the 8 of an epoch (native: no kernel paths), the final accuracy, the multiplier's relative energy and power
        assert len(data["metrics"]) == 11 and data["metrics"]["mult_relative_energy"] == [(0, 1.0)]
        assert data["metrics"]["mult_relative_power"] == [(0, 1.0)]
    processes = [json.loads(line) for line in loaded.read_text().splitlines()]
    workers = [p for p in processes if p["argv"][0].endswith("worker.py")]
    assert [p["mlflow"] for p in workers] == [False] * TRAINING_CELLS, workers
    # nor scikit-learn or pandas (Keras' optional integrations: models.engines.import_keras; the digits are read
    # without scikit-learn); matplotlib only for the learning curves a finished cell draws
    assert all(set(p["keras_optional"]) <= {"matplotlib"} for p in workers), workers
