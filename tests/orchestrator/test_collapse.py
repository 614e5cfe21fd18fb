"""A run that collapses without a NaN (loss back at chance, or far above its best) is rolled back to its last healthy
epoch end with a lower learning rate, or fails with the reason; it is never reported as a finished result.

The collapse is forced with a step schedule whose factor is > 1: epoch 1 trains at lr 0.05, epoch 2 at 0.05 * 40 = 2,
which wrecks LeNet-300-100 on digits (44 steps per epoch at batch 32) without overflowing.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from orchestrator.cell import collapse
from tests.orchestrator.helpers import TINY, run_data

FORCE = ["train.optimizer.lr=0.05", "train.schedule.name=step", "train.schedule.step_epochs=1", "train.schedule.gamma=40"]
STEPS_PER_EPOCH = 44


@pytest.mark.parametrize("loss, earlier, expected", [
    (2.31, [0.5], "back at chance level (ln 10 = 2.3026) after 0.5000"),
    (2.08, [1.61], "back at chance level"),            # 0.9 ln 10 = 2.072, 0.7 ln 10 = 1.612
    (2.06, [1.61], None),                              # not quite at chance, and not 0.58 above 1.61
    (1.40, [0.30, 0.45], "far above its best earlier epoch (0.3000)"),
    (0.35, [0.30], None),                              # an ordinary bump
    (0.07, [0.02], None),                              # 3.5x the best, but only 0.05 above it
    (2.30, [], None),                                  # the first epoch is never judged
    (2.30, [2.25], None),                              # never learned: not a collapse
])
def test_verdict(loss, earlier, expected):
    got = collapse.verdict(loss, earlier, num_classes=10)
    assert (got is None) == (expected is None), got
    if expected:
        assert expected in got


def test_collapse_rolls_back_to_the_healthy_epoch_with_a_lower_rate(workdir, capfd):
    from orchestrator.cell.run import run_cell

    cfg = workdir.cfg(*TINY, *FORCE, "train.collapse.lr_factor=0.01")
    result = run_cell(cfg, supervise=False)
    assert result.status == "finished", result
    cell = Path(result.cell_dir)
    skips = json.loads((cell / "skips.json").read_text())
    assert [(c["epoch"], c["from_step"], c["lr_factor"]) for c in skips["collapses"]] == [(2, STEPS_PER_EPOCH, 0.01)]
    assert "rollback 1 of at most 2 to the end of epoch 1 (global step 44)" in capfd.readouterr().err
    # The collapsed epoch's checkpoints are set aside, never resumed from; the healthy one is kept apart.
    assert list((cell / "checkpoints").glob("collapsed-step-*.json"))
    assert [p.name for p in (cell / "last-good-epoch" / "checkpoints").glob("step-*.json")] == ["step-000000088.json"]
    data = run_data(workdir.uri, result.run_id)
    assert data["status"] == "FINISHED"
    assert data["tags"]["amdnn.collapse_rollbacks"] == "1" and data["tags"]["amdnn.lr_scale"] == "0.01"
    assert "epoch 2: training loss" in data["tags"]["amdnn.last_collapse"]
    # Epoch 2 logged once, from the replay, at the lowered rate 0.05 * 40 * 0.01; it learned again.
    assert [s for s, _ in data["metrics"]["epoch"]] == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]
    assert [round(v, 6) for _, v in data["metrics"]["lr"]] == [0.05, 0.02]
    losses = [v for _, v in data["metrics"]["loss"]]
    assert losses[1] < 0.7 * math.log(10) and result.test_accuracy > 0.8, (losses, result.test_accuracy)
    # A later attempt in this folder (a resume after a crash) reads the same rates back from skips.json.
    from orchestrator.config.cell import resolve
    from orchestrator.tracking.tracker import Tracker
    from orchestrator.cell.trainer import _Run

    again = _Run(resolve(cfg), result.identity, cell, Tracker(workdir.uri, "amdnn", result.identity, cell))
    assert [again.learning_rate(s) for s in (0, STEPS_PER_EPOCH - 1)] == [0.05, 0.05]
    assert [again.learning_rate(s) for s in (STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH - 1)] == \
        pytest.approx([0.02, 0.02], rel=1e-12)


def test_collapse_beyond_the_bound_fails_with_the_reason(workdir):
    from orchestrator.cell.run import run_cell

    result = run_cell(workdir.cfg(*TINY, *FORCE, "train.collapse.rollbacks=0"), supervise=False)
    assert result.status == "failed" and result.test_accuracy is None
    assert "epoch 2: training loss" in result.error and "train.collapse.rollbacks=0" in result.error, result.error
    cell = Path(result.cell_dir)
    assert not (cell / "done.json").exists() and not (cell / "final_weights.npz").exists()
    data = run_data(workdir.uri, result.run_id)
    assert data["status"] == "FAILED" and "epoch 2: training loss" in data["tags"]["amdnn.error"]
    assert [s for s, _ in data["metrics"]["epoch"]] == [STEPS_PER_EPOCH]  # the collapsed epoch is not a result


@pytest.mark.parametrize("accuracy, loss, fails", [
    (0.1142, 2.3459, True),    # never learned: at chance on both counts
    (0.1142, 1.9000, False),   # learning slowly: the loss has moved
    (0.3000, 2.2000, False),   # above chance
])
def test_final_verdict(accuracy, loss, fails):
    got = collapse.final_verdict(accuracy, loss, num_classes=10)
    assert (got is not None) == fails, got
    if fails:
        assert f"final test accuracy {accuracy:.4f} is at chance level (1/10 = 0.1000)" in got


def test_a_run_that_learned_nothing_fails_with_the_reason_not_finished(workdir):
    from orchestrator.cell.run import run_cell

    result = run_cell(workdir.cfg(*TINY, "train.optimizer.lr=1e-9"), supervise=False)
    assert result.status == "failed" and "the run learned nothing: final test accuracy" in result.error, result
    assert not (Path(result.cell_dir) / "done.json").exists()
    data = run_data(workdir.uri, result.run_id)
    assert data["status"] == "FAILED" and "the run learned nothing" in data["tags"]["amdnn.error"]
