"""A grid cell under an integer mode: it trains, logs the circuit's figures, and a SIGKILL mid-epoch resumes to the
bits of the uninterrupted run (the layers' running activation ranges are checkpointed with the weights).

The cell: LeNet-300-100 on the bundled digits through EvoApproxLib's unsigned mul8u_2AC (asymmetric codes), 2 epochs
at batch 16 (89 steps an epoch), a checkpoint every 7 steps; real Slurm is not needed for this (tests/cluster covers
jobs), the cell runs as launch.py's local job does.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest

from ops.modes.circuit_errors import circuit_errors
from ops.modes.integer_tables import read_integer_table
from tests.orchestrator.helpers import (TINY, Workdir, assert_same_weights, cell_dirs, final_weights,
                                       newest_checkpoint_step, result_of, run_cell_process, run_data, wait_for)

TABLE = Path(__file__).resolve().parents[2] / "ops" / "luts" / "evoapprox" / "mul8u_2AC.int8u.npy"
CELL = [*[o for o in TINY if not o.startswith("mult=")], "mult=uint8", f"mult.table={TABLE}", "train.batch_size=16",
        "train.calibration_batches=4"]


def _finish(work: Workdir) -> dict:
    proc = run_cell_process([*work.overrides, *CELL], cwd=work.path)
    proc.wait(timeout=300)
    return result_of((work.path / "run.log").read_text())


@pytest.mark.slow
def test_integer_cell_trains_and_resumes_bit_identically(tmp_path):
    reference_work = Workdir(tmp_path / "reference")
    reference_work.path.mkdir()
    reference = _finish(reference_work)
    assert reference["status"] == "finished", reference
    assert "calibrated the integer layers' activation ranges on 4 batches" in (reference_work.path / "run.log").read_text()
    data = run_data(reference_work.uri, reference["run_id"])
    assert data["params"]["mult.name"] == "uint8" and data["tags"]["amdnn.mult"] == "uint8:mul8u_2AC.int8u.npy"
    accuracy = data["metrics"]["test_accuracy"][-1][1]
    assert accuracy > 0.8, f"LeNet-300-100 under mul8u_2AC reached {accuracy} on the digits: it must train"
    mre = circuit_errors(read_integer_table(TABLE)[0], "unsigned")["mre%"] / 100
    assert abs(data["metrics"]["mult_mean_rel_error"][-1][1] - mre) < 1e-9, "the circuit's mean relative error"
    weights = final_weights(reference["cell_dir"])
    ranges = [name for name in weights if "activation_range" in name]
    assert len(ranges) == 3 and all(np.all(np.asarray(weights[name])[1] > 0) for name in ranges)

    work = Workdir(tmp_path / "killed")
    work.path.mkdir()
    proc = run_cell_process([*work.overrides, *CELL], cwd=work.path)
    wait_for(lambda: proc.poll() is not None or any(newest_checkpoint_step(d) >= 100
                                                       for d in cell_dirs(work.path / "ck")), 200, "step 100")
    os.killpg(proc.pid, signal.SIGKILL)  # the cell's whole process group: launcher and training process
    proc.wait(timeout=30)
    resumed = _finish(work)
    assert resumed["status"] == "finished" and resumed["identity"] == reference["identity"]
    log = (work.path / "run.log").read_text()
    assert "resumed from" in log and log.count("calibrated the integer layers") == 1, "calibrated at the start only"
    assert_same_weights(final_weights(resumed["cell_dir"]), weights)


def test_calibration_changes_the_identity_only_when_asked_for(tmp_path):
    """train.calibration_batches=0 is the cell of before the key (same identity as a config without it); any other
    value is another cell."""
    from orchestrator.config.identity import cell_identity
    from orchestrator.config.validate import to_dict

    work = Workdir(tmp_path)
    plain = to_dict(work.cfg(*CELL[:-1]))
    before_the_key = {**plain, "train": {k: v for k, v in plain["train"].items() if k != "calibration_batches"}}
    assert cell_identity(plain) == cell_identity(before_the_key)
    assert cell_identity(to_dict(work.cfg(*CELL))) != cell_identity(plain)


SIGNED = TABLE.parent / "mul8s_1L2H.int8s.npy"
TABLE_GRADIENTS = [*[o for o in TINY if not o.startswith("mult=")], "mult=int8", f"mult.table={SIGNED}",
                   "train.batch_size=16", "mult.table_gradients=true"]


@pytest.mark.slow
def test_a_cell_with_gradients_through_the_table_trains(tmp_path):
    """mult.table_gradients=true: every product of the backward through the circuit too; the cell trains, records
    the setting, and is another cell than the straight-through one (false is the cell of before the key)."""
    from orchestrator.config.identity import cell_identity
    from orchestrator.config.validate import to_dict

    work = Workdir(tmp_path)
    proc = run_cell_process([*work.overrides, *TABLE_GRADIENTS], cwd=work.path)
    proc.wait(timeout=300)
    result = result_of((work.path / "run.log").read_text())
    assert result["status"] == "finished", result
    data = run_data(work.uri, result["run_id"])
    assert data["params"]["mult.table_gradients"] == "True"
    accuracy = data["metrics"]["test_accuracy"][-1][1]
    assert accuracy > 0.8, f"LeNet-300-100 with mul8s_1L2H's gradients reached {accuracy} on the digits"
    with_table = to_dict(work.cfg(*TABLE_GRADIENTS))
    straight = to_dict(work.cfg(*TABLE_GRADIENTS[:-1]))
    before_the_key = {**straight, "mult": {k: v for k, v in straight["mult"].items() if k != "table_gradients"}}
    assert cell_identity(straight) == cell_identity(before_the_key) != cell_identity(with_table)
