"""A grid cell on the GPU through the torch engine (the captured step): ResNet-18 under am16 on real Fashion-MNIST,
SIGKILLed twice mid-epoch and re-run, ends with every logged metric and the final weights bit-identical to an
uninterrupted run; and two uninterrupted runs are bit-identical to each other.

The cells run with tracking_mode=queue (no MLflow on the GPU machine): the metrics compared are the records each cell
queued, an epoch's record counted once by its step as the importer does. AMDNN_DEVICE_DATA names the data directory
holding fashion_mnist/; AMDNN_DEVICE_EPOCHS the epochs (default 2).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.orchestrator.helpers import (DETERMINISTIC, PYTHON, REPO, RUN_CELL, cell_dirs, env, final_weights,
                                       newest_checkpoint_step, result_of, wait_for)

DATA = os.environ.get("AMDNN_DEVICE_DATA")
EPOCHS = int(os.environ.get("AMDNN_DEVICE_EPOCHS", "2"))
STEPS_PER_EPOCH = 60000 // 128


def _cell(root: Path) -> list[str]:
    return ["engine=torch", "model=resnet18", "mult=am16", "dataset=fashion_mnist", f"data_dir={DATA}",
            f"train.epochs={EPOCHS}", "checkpoint.every_n_steps=100", f"checkpoint_root={root / 'ck'}",
            f"tracking_uri=sqlite:///{root / 'mlflow.db'}", "tracking_mode=queue"]


def _start(root: Path) -> subprocess.Popen:
    root.mkdir(parents=True, exist_ok=True)
    out = open(root / "run.log", "a")
    return subprocess.Popen([PYTHON, "-c", RUN_CELL, str(REPO / "conf"), *_cell(root)], env=env(), cwd=root,
                            start_new_session=True, stdout=out, stderr=subprocess.STDOUT, text=True)


def _finish(root: Path) -> dict:
    proc = _start(root)
    proc.wait(timeout=1800)
    result = result_of((root / "run.log").read_text())
    assert result["status"] == "finished", (root / "run.log").read_text()[-3000:]
    return result


def _metrics(cell_dir: str) -> dict:
    """The deterministic metrics the cell queued, each step once (the first record of it, as the importer logs)."""
    seen, out = set(), {}
    for line in (Path(cell_dir) / "tracking-queue.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("op") != "metrics" or (record["step"], record["check"]) in seen:
            continue
        seen.add((record["step"], record["check"]))
        for key, value in record["metrics"].items():
            if key in DETERMINISTIC:
                out.setdefault(key, []).append((record["step"], value))
    return out


@pytest.mark.skipif(not DATA, reason="AMDNN_DEVICE_DATA (a data directory with fashion_mnist/) is not set")
def test_gpu_cell_killed_twice_resumes_bit_identical(tmp_path):
    reference = _finish(tmp_path / "reference")
    again = _finish(tmp_path / "again")
    ref_weights, ref_metrics = final_weights(reference["cell_dir"]), _metrics(reference["cell_dir"])
    assert len(ref_metrics["epoch"]) == EPOCHS and ref_metrics["test_accuracy"][-1][1] > 0.8, ref_metrics
    for name, value in final_weights(again["cell_dir"]).items():
        assert np.array_equal(value, ref_weights[name]), f"two uninterrupted runs differ in {name}"
    assert _metrics(again["cell_dir"]) == ref_metrics

    seed = int(os.environ.get("AMDNN_TEST_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    print(f"kill points drawn with AMDNN_TEST_SEED={seed}")
    root = tmp_path / "killed"
    total = EPOCHS * STEPS_PER_EPOCH
    for step in sorted(rng.sample(range(50, total - 50), 2)):
        proc = _start(root)
        wait_for(lambda: proc.poll() is not None or any(newest_checkpoint_step(d) >= step
                                                           for d in cell_dirs(root / "ck")), 1200, f"step {step}")
        time.sleep(rng.uniform(0.5, 3.0))  # into the steps after that checkpoint: mid-epoch
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    result = _finish(root)
    assert result["identity"] == reference["identity"]
    events = [json.loads(l)["event"] for l in (Path(result["cell_dir"]) / "events.jsonl").read_text().splitlines()]
    assert events.count("start") == 3 and events[-1] == "finished", events
    for name, value in final_weights(result["cell_dir"]).items():
        assert np.array_equal(value, ref_weights[name]), f"variable {name} differs after the kills"
    assert _metrics(result["cell_dir"]) == ref_metrics
    print("bit-identical after two SIGKILLs; final test accuracy", ref_metrics["test_accuracy"][-1][1])
