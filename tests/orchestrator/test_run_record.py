"""A run's reproducibility record and the meaning of its epoch metrics, on real cells and a real MLflow store
(LeNet-300-100 under am16 on digits, 44 steps an epoch):

- the record (commit and dirty flag as git says them, diff, packages, resolved config) and the final weights reach
  the run through a queue-mode cell and the importer as well as directly; `python -m orchestrator.weights` loads the
  weights back into a model that predicts what the cell's own final weights predict;
- `python -m orchestrator.rerun` gives a launch that composes to the same cell and, executed, ends with the same bits;
- a cell SIGKILLed mid-epoch and resumed logs the same metrics as an uninterrupted one, kernel-path counters
  included; epoch_time_s and eval_time_s are logged for every epoch.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.orchestrator.helpers import (PYTHON, REPO, Workdir, assert_same_weights, cell_dirs,
                                       deterministic_metrics, env, final_weights, newest_checkpoint_step, result_of,
                                       run_cell_process, run_data, wait_for)

CELL = ["mult=am16", "model=lenet300", "train.epochs=2", "train.batch_size=32", "checkpoint.every_n_steps=7",
        "checkpoint.keep_last=3", "tracking_patience_s=5"]
SPE = 44  # steps an epoch
COUNTERS = ("gemm_fast_calls", "gemm_generic_calls", "gemm_fast_products", "gemm_generic_products")


def _counters_and_metrics(data: dict) -> dict:
    return {**deterministic_metrics(data), **{k: data["metrics"][k] for k in COUNTERS}}


def _artifacts(uri: str, run_id: str) -> set[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found, folders = set(), [None]
    while folders:
        for item in client.list_artifacts(run_id, folders.pop()):
            (folders.append(item.path) if item.is_dir else found.add(item.path))
    return found


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted cell in queue mode (its records reach the store only through the importer)."""
    from orchestrator.cell.run import run_cell
    from orchestrator.tracking.importer import import_pending

    work = Workdir(tmp_path_factory.mktemp("reference"))
    result = run_cell(work.cfg(*CELL, "tracking_mode=queue"), supervise=False)
    assert result.status == "finished", result
    assert not (work.path / "mlflow.db").exists()  # the cell only queued: nothing reached the store yet
    import_pending(work.uri)
    from tests.orchestrator.helpers import runs_of_experiment

    run_id = runs_of_experiment(work.uri)[0].info.run_id
    return {"work": work, "run_id": run_id, "cell_dir": result.cell_dir, "data": run_data(work.uri, run_id)}


def test_the_record_has_the_commit_the_dirty_flag_and_the_config(reference):
    tags, uri, run_id = reference["data"]["tags"], reference["work"].uri, reference["run_id"]
    assert tags["amdnn.git_commit"] == tags["mlflow.source.git.commit"] == _git("rev-parse", "HEAD").strip()
    assert tags["amdnn.git_dirty"] == str(bool(_git("status", "--porcelain").strip())).lower()
    assert {"amdnn.host", "amdnn.ops_build", "mlflow.user", "mlflow.source.name"} <= tags.keys()
    assert {"record/record.json", "record/git.diff", "record/requirements.txt", "record/config.yaml",
            "weights/final_weights.npz"} <= _artifacts(uri, run_id)
    folder = Path(reference["cell_dir"]) / "artifacts" / "record"
    requirements = (folder / "requirements.txt").read_text().splitlines()
    assert any(line.lower().startswith("mlflow==") for line in requirements)
    assert "name: am16" in (folder / "config.yaml").read_text()


def test_the_weights_artifact_loads_back_and_predicts_as_the_cell_did(reference):
    from models import datasets
    from orchestrator import weights
    from orchestrator.config.cell import resolve

    model = weights.load_model(reference["run_id"], reference["work"].uri)
    mine = final_weights(reference["cell_dir"])
    assert_same_weights({v.path: np.asarray(v.numpy()) for v in model.variables}, mine)
    own = weights.build(resolve(reference["work"].cfg(*CELL)), mine)
    x = datasets.load("digits", None).x_test
    assert np.array_equal(np.asarray(model.predict(x, verbose=0)), np.asarray(own.predict(x, verbose=0)))
    shown = subprocess.run([PYTHON, "-m", "orchestrator.weights", reference["run_id"], "--tracking-uri",
                            reference["work"].uri], env=env(), capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0 and "6 variables (50610 numbers) loaded" in shown.stdout, shown.stderr[-3000:]


def test_rerun_from_the_run_id_ends_with_the_same_bits(reference, tmp_path):
    from orchestrator import rerun

    found = rerun.command(reference["run_id"], reference["work"].uri, str(tmp_path / "ck"))
    assert found["same_cell"] and "model=lenet300" in found["argv"] and "mult=am16" in found["argv"]
    done = subprocess.run([PYTHON, "-m", "orchestrator.rerun", reference["run_id"], "--tracking-uri",
                           reference["work"].uri, "--checkpoint-root", str(tmp_path / "ck"), "--execute"],
                          env=env(), cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (again,) = cell_dirs(tmp_path / "ck")
    assert again.name == Path(reference["cell_dir"]).name
    assert_same_weights(final_weights(again), final_weights(reference["cell_dir"]))


def test_a_cell_killed_mid_epoch_logs_the_counters_of_an_uninterrupted_one(reference, tmp_path):
    work = Workdir(tmp_path)
    proc = run_cell_process([*work.overrides, *CELL], cwd=work.path)
    # The kill lands in epoch 2 after its checkpoint at step 56: epoch 2's first 12 steps were trained by the first
    # attempt, the rest by the second.
    wait_for(lambda: proc.poll() is not None or any(newest_checkpoint_step(d) >= SPE + 12
                                                       for d in cell_dirs(work.path / "ck")), 240, "step 56")
    os.killpg(proc.pid, 9)
    proc.wait(timeout=30)
    (cell_dir,) = cell_dirs(work.path / "ck")
    assert SPE < newest_checkpoint_step(cell_dir) < 2 * SPE, "the kill must land mid-epoch 2"
    time.sleep(0.1)
    proc = run_cell_process([*work.overrides, *CELL], cwd=work.path)
    proc.wait(timeout=300)
    result = result_of((work.path / "run.log").read_text())
    assert result["status"] == "finished", result
    data = run_data(work.uri, result["run_id"])
    assert _counters_and_metrics(data) == _counters_and_metrics(reference["data"])
    assert data["metrics"]["gemm_fast_calls"][1][1] + data["metrics"]["gemm_generic_calls"][1][1] == SPE * 8 + 2 * 3
    for metrics in (data["metrics"], reference["data"]["metrics"]):
        assert [s for s, _ in metrics["epoch_time_s"]] == [SPE, 2 * SPE] and all(t > 0 for _, t in
                                                                                 metrics["epoch_time_s"])
        assert [s for s, _ in metrics["eval_time_s"]] == [SPE, 2 * SPE]
    assert {"record/record.json", "weights/final_weights.npz"} <= _artifacts(work.uri, result["run_id"])
    assert "train " in (work.path / "run.log").read_text()  # the console's epoch line names the logged time


def test_a_checkpoint_state_from_before_the_epoch_sums_still_loads():
    """A checkpoint's State as written before path_sums and train_seconds: its epoch resumes with nothing counted."""
    from orchestrator.cell.trainer import State

    written_before = {"epoch": 1, "step_in_epoch": 7, "global_step": 51, "loss_sum": 3.0, "correct": 100,
                      "seen": 224, "trained_steps": 7, "history": [{"epoch": 1, "loss": 0.9}]}
    state = State(**written_before)
    assert state.path_sums == {} and state.train_seconds == 0.0 and state.global_step == 51
