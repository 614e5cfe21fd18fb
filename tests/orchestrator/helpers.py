"""Helpers (imported by name) for the orchestrator tests: real configs composed from conf/, a real SQLite MLflow store in tmp dirs,
real training on digits with tiny settings (multiplier "native" where the test is about the life of the run)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import numpy as np

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# Tiny and fast: 2 epochs of 44 steps on digits, checkpoints every 7 steps.
TINY = ["mult=native", "train.epochs=2", "train.batch_size=32", "checkpoint.every_n_steps=7",
        "checkpoint.keep_last=3", "tracking_patience_s=5"]


class Workdir:
    """A tmp dir with the overrides that point checkpoints and MLflow into it."""

    def __init__(self, path: Path):
        self.path = path
        self.uri = f"sqlite:///{path / 'mlflow.db'}"
        self.overrides = [f"checkpoint_root={path / 'ck'}", f"tracking_uri={self.uri}"]

    def cfg(self, *extra: str):
        return compose(*self.overrides, *extra)


def compose(*overrides: str):
    """A config composed from the repository's conf/ exactly as launch.py would compose it."""
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return e


RUN_CELL = """
import json, sys
from hydra import compose, initialize_config_dir
from orchestrator.cell.run import run_cell
with initialize_config_dir(config_dir=sys.argv[1], version_base="1.3"):
    cfg = compose(config_name="config", overrides=sys.argv[2:])
print("RESULT " + json.dumps(run_cell(cfg).to_dict()), flush=True)
"""


def run_cell_process(overrides: list[str], cwd: Path, log: Path | None = None) -> subprocess.Popen:
    """run_cell in a separate process (its own session, so the test can kill it with its worker), output to `log`
    (default cwd/run.log, appended)."""
    out = open(log or Path(cwd) / "run.log", "a")
    try:
        return subprocess.Popen([PYTHON, "-c", RUN_CELL, str(REPO / "conf"), *overrides], env=env(), cwd=cwd,
                                start_new_session=True, stdout=out, stderr=subprocess.STDOUT, text=True)
    finally:
        out.close()


def newest_checkpoint_step(cell_dir: Path) -> int:
    steps = [int(p.stem.split("-")[1]) for p in (Path(cell_dir) / "checkpoints").glob("step-*.json")]
    return max(steps, default=-1)


def cell_dirs(root: Path) -> list[Path]:
    return sorted(p for p in (Path(root)).glob("*") if p.is_dir())


def wait_for(condition, timeout: float, what: str, poll: float = 0.01) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(poll)


def result_of(output: str) -> dict:
    lines = [l for l in output.splitlines() if l.startswith("RESULT ")]
    assert lines, f"no result in output:\n{output[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def final_weights(cell_dir) -> dict:
    with np.load(Path(cell_dir) / "final_weights.npz") as f:
        return {k: f[k] for k in f.files}


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), f"variable {k} differs"


def run_data(uri: str, run_id: str) -> dict:
    """status, tags, params and the full history of every metric of one run."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    run = client.get_run(run_id)
    history = {key: [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]
               for key in run.data.metrics}
    return {"status": run.info.status, "tags": run.data.tags, "params": run.data.params, "metrics": history}


def runs_of_experiment(uri: str, experiment: str = "amdnn") -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    return [] if exp is None else client.search_runs([exp.experiment_id], max_results=1000)


DETERMINISTIC = ("epoch", "loss", "accuracy", "test_accuracy", "lr", "final_test_accuracy")


def deterministic_metrics(data: dict) -> dict:
    return {k: v for k, v in data["metrics"].items() if k in DETERMINISTIC}


def launch(tmp_path, *args: str, timeout: int = 400, environment: dict | None = None) -> subprocess.CompletedProcess:
    """`python launch.py ARGS` as a user runs it, with its checkpoints and MLflow store in tmp_path."""
    overrides = [f"checkpoint_root={tmp_path / 'ck'}", f"tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    return subprocess.run([PYTHON, str(REPO / "launch.py"), *args, *overrides], cwd=tmp_path,
                          env=environment or env(), capture_output=True, text=True, timeout=timeout)


T = TypeVar("T")


def side_by_side(*calls: Callable[[], T]) -> list[T]:
    """Each call (a launch or a cell in a subprocess of its own) at once, their results in order; an assertion one
    raised is raised here. The CI machine has two cores, and one launch keeps about one of them busy (imports, Python,
    small batches), so two independent launches take little more time side by side than one alone."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


def record_run(workdir: Workdir, accuracy: float | None, *overrides: str, tagged: bool = True,
               status: str = "FINISHED", epochs: Sequence[tuple[float, float]] = (),
               start_metrics: dict | None = None) -> str:
    """A run of the cell `overrides` describe, logged through the project's Tracker as run_cell logs it, without
    training: its params (the per-layer map too), per epoch its (test accuracy, loss) from `epochs`, `accuracy` as its
    final test accuracy (None: none), `start_metrics` at step 0 (e.g. the relative multiplication energy), ended with
    `status`. tagged=False: as a run logged before the defining-config tag existed. Its identity."""
    from orchestrator.config.cell import resolve
    from orchestrator.config.identity import base_tags, cell_identity, cell_name
    from orchestrator.config.validate import validate
    from orchestrator.tracking.tracker import FINAL_KEY, TAG_DEFINING, Tracker, flatten

    c = validate(workdir.cfg(*overrides))
    identity = cell_identity(c)
    tags = base_tags(identity, c)
    if not tagged:
        del tags[TAG_DEFINING]
    tracker = Tracker(workdir.uri, c["experiment"], identity, workdir.path / "cells" / identity[:12],
                      run_name=cell_name(c, identity))
    tracker.start({**flatten(c), **resolve(c).layer_params()}, tags)
    if start_metrics:
        tracker.log_metrics(0, start_metrics, check=next(iter(start_metrics)))
    for epoch, (test_accuracy, loss) in enumerate(epochs, start=1):
        tracker.log_epoch(100 * epoch, {"epoch": epoch, "test_accuracy": test_accuracy, "loss": loss})
    if accuracy is not None:
        tracker.log_metrics(100 * len(epochs) + 1, {FINAL_KEY: accuracy}, check=FINAL_KEY)
    tracker.end(status)
    assert tracker.flush(patience_s=30, force=True)
    return identity
