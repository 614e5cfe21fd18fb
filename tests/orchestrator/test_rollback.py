"""NaN/inf rollback (bounded, reported, the bad batch skipped) and refusal of another cell's checkpoint.

These train in the test process (run_cell(supervise=False)) so that the data can be patched to hold a bad batch.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.orchestrator.helpers import TINY, final_weights, run_data

BAD_STEP = 50  # global step whose batch holds a NaN (epoch 0 of 89 steps at batch size 16)


@pytest.fixture
def nan_at(monkeypatch):
    """Make the batch of the given global steps hold a NaN pixel, as a corrupt example would."""
    from models import datasets

    real = datasets.batches

    def install(bad_steps, steps_per_epoch=89):
        def batches(dataset, batch_size, seed, epoch, start_step=0, augment=False):
            for step, x, y in real(dataset, batch_size, seed, epoch, start_step, augment):
                if epoch * steps_per_epoch + step in bad_steps:
                    x = x.copy()
                    x[0, 0, 0, 0] = np.nan
                yield step, x, y

        monkeypatch.setattr(datasets, "batches", batches)

    return install


def test_nan_rolls_back_and_skips_the_bad_batch(workdir, nan_at, capfd):
    from orchestrator.cell.run import run_cell

    nan_at({BAD_STEP})
    result = run_cell(workdir.cfg(*TINY, "train.batch_size=16"), supervise=False)
    assert result.status == "finished", result
    out = capfd.readouterr().err
    assert f"at global step {BAD_STEP}: rollback 1 of at most 3" in out and "resumed from step-000000049" in out
    cell = Path(result.cell_dir)
    assert json.loads((cell / "skips.json").read_text()) == {"steps": [BAD_STEP], "rollbacks": 1}
    assert all(np.isfinite(w).all() for w in final_weights(cell).values())
    data = run_data(workdir.uri, result.run_id)
    assert data["status"] == "FINISHED"
    assert data["tags"]["amdnn.nan_rollbacks"] == "1" and data["tags"]["amdnn.skipped_steps"] == str(BAD_STEP)
    assert [s for s, _ in data["metrics"]["epoch"]] == [89, 178]


def test_nan_rollbacks_are_bounded(workdir, nan_at):
    from orchestrator.cell.run import run_cell

    nan_at(set(range(BAD_STEP, 178)))  # diverged for good: every later batch gives NaN
    result = run_cell(workdir.cfg(*TINY, "train.batch_size=16", "retries.nan_rollbacks=2"), supervise=False)
    assert result.status == "failed" and "3 rollbacks exceed retries.nan_rollbacks=2" in result.error
    assert not (Path(result.cell_dir) / "done.json").exists()
    assert run_data(workdir.uri, result.run_id)["status"] == "FAILED"


def test_checkpoint_of_another_model_or_multiplier_is_refused(workdir):
    from orchestrator.cell.run import run_cell

    first = run_cell(workdir.cfg(*TINY, "train.epochs=1"), supervise=False)
    assert first.status == "finished"
    other = workdir.cfg(*TINY, "train.epochs=1", "model=lenet5", "mult=acc32")
    from orchestrator.cell.run import cell_dir_of

    target = cell_dir_of(other)
    target.mkdir(parents=True)
    shutil.copytree(Path(first.cell_dir) / "checkpoints", target / "checkpoints")  # someone copied the wrong folder
    result = run_cell(other, supervise=False)
    assert result.status == "failed"
    assert "belongs to another cell" in result.error and "model 'lenet300' (this cell: 'lenet5')" in result.error
    assert "mult 'native' (this cell: 'acc32')" in result.error
    assert sorted(p.name for p in (target / "checkpoints").iterdir()) == \
        sorted(p.name for p in (Path(first.cell_dir) / "checkpoints").iterdir())  # refused, left untouched
