"""Kill anywhere, resume exactly: SIGKILL at random points, corrupt checkpoints, crashes of the training process.

Every scenario ends with final weights bit-identical to one uninterrupted run of the same cell and an MLflow run
holding every epoch exactly once, with the same metric values.
"""
from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.orchestrator.helpers import (TINY, Workdir, assert_same_weights, cell_dirs, deterministic_metrics,
                                       final_weights, newest_checkpoint_step, result_of, run_cell_process, run_data,
                                       wait_for)

CELL = [*TINY, "train.batch_size=16"]  # 89 steps an epoch, 178 in all, a checkpoint every 7
STEPS = 178


def _finish(work: Workdir, extra=(), timeout=180) -> dict:
    proc = run_cell_process([*work.overrides, *CELL, *extra], cwd=work.path)
    proc.wait(timeout=timeout)
    return result_of((work.path / "run.log").read_text())


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted run: its weights and MLflow metrics are what every interrupted run must end with."""
    from orchestrator.cell.run import run_cell

    work = Workdir(tmp_path_factory.mktemp("reference"))
    # In this process, without a worker: also checks that where the training runs does not change a bit.
    result = run_cell(work.cfg(*CELL), supervise=False).to_dict()
    assert result["status"] == "finished", result
    return {"weights": final_weights(result["cell_dir"]), "metrics": deterministic_metrics(
        run_data(work.uri, result["run_id"])), "identity": result["identity"]}


def _check_same_as_reference(work: Workdir, result: dict, reference: dict) -> dict:
    assert result["status"] == "finished" and result["identity"] == reference["identity"]
    assert_same_weights(final_weights(result["cell_dir"]), reference["weights"])
    data = run_data(work.uri, result["run_id"])
    assert data["status"] == "FINISHED"
    assert [s for s, _ in data["metrics"]["epoch"]] == [89, 178]  # every epoch exactly once
    assert deterministic_metrics(data) == reference["metrics"]
    return data


def _kill_group(proc) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.mark.slow
def test_kill_anywhere_then_resume_is_bit_identical(workdir, reference):
    seed = int(os.environ.get("AMDNN_TEST_SEED", time.time_ns() % 10**6))
    rng = random.Random(seed)
    print(f"kill points drawn with AMDNN_TEST_SEED={seed}")
    # One kill at a random moment (often start-up or the first steps), then kills just after random checkpoints,
    # with a random extra delay that lands them inside a step, a checkpoint write or an MLflow flush.
    plans = [("time", rng.uniform(0.0, 4.0))] + [("step", s) for s in sorted(rng.sample(range(10, STEPS - 5), 3))]
    for kind, value in plans:
        proc = run_cell_process([*workdir.overrides, *CELL], cwd=workdir.path)
        if kind == "time":  # a random moment after the training process started: its start-up or first steps
            wait_for(lambda: proc.poll() is not None or any((d / "events.jsonl").exists()
                                                            for d in cell_dirs(workdir.path / "ck")), 120, "start")
            time.sleep(value)
        else:
            cell = workdir.path / "ck"
            wait_for(lambda: proc.poll() is not None or any(newest_checkpoint_step(d) >= value
                                                               for d in cell_dirs(cell)), 120, f"step {value}")
            time.sleep(rng.uniform(0, 0.05))
        _kill_group(proc)
    result = _finish(workdir)
    data = _check_same_as_reference(workdir, result, reference)
    events = [json.loads(l)["event"] for l in (Path(result["cell_dir"]) / "events.jsonl").read_text().splitlines()]
    assert events.count("start") >= 2 and events[-1] == "finished"
    assert data["tags"]["amdnn.cell"] == reference["identity"]


def test_corrupt_newest_checkpoint_rolls_back_and_says_so(workdir, reference):
    proc = run_cell_process([*workdir.overrides, *CELL], cwd=workdir.path)
    wait_for(lambda: any(newest_checkpoint_step(d) >= 120 for d in cell_dirs(workdir.path / "ck")), 120, "step 120")
    _kill_group(proc)
    cell = cell_dirs(workdir.path / "ck")[0]
    newest = newest_checkpoint_step(cell)
    payload = cell / "checkpoints" / f"step-{newest:09d}.npz"
    payload.write_bytes(payload.read_bytes()[: payload.stat().st_size // 2])  # truncated, as by a full disk
    log = workdir.path / "run.log"
    log.write_text("")
    result = _finish(workdir)
    output = log.read_text()
    assert f"step-{newest:09d}.npz: truncated payload" in output
    resumed = [l for l in output.splitlines() if "resumed from" in l]
    assert resumed and f"step-{newest:09d}" not in resumed[0]
    data = _check_same_as_reference(workdir, result, reference)
    assert f"step-{newest:09d}" in data["tags"]["amdnn.skipped_checkpoints"]


def _worker_pid(cell: Path) -> int:
    starts = [json.loads(l) for l in (cell / "events.jsonl").read_text().splitlines() if '"start"' in l]
    return starts[-1]["pid"]


def test_crashed_training_process_is_restarted_from_its_checkpoint(workdir, reference, sig=signal.SIGSEGV):
    proc = run_cell_process([*workdir.overrides, *CELL], cwd=workdir.path)
    wait_for(lambda: any(newest_checkpoint_step(d) >= 60 for d in cell_dirs(workdir.path / "ck")), 120, "step 60")
    os.kill(_worker_pid(cell_dirs(workdir.path / "ck")[0]), sig)  # the training child, not the supervisor
    proc.wait(timeout=180)
    result = result_of((workdir.path / "run.log").read_text())
    assert result["attempts"] == 2
    data = _check_same_as_reference(workdir, result, reference)
    assert data["tags"]["amdnn.crashes"] == "1" and sig.name in data["tags"]["amdnn.last_crash"]
    assert f"crashed (signal {sig.name})" in (workdir.path / "run.log").read_text()


def test_crash_retries_are_bounded(workdir):
    proc = run_cell_process([*workdir.overrides, *CELL, "retries.crashes=0"], cwd=workdir.path)
    wait_for(lambda: any(newest_checkpoint_step(d) >= 20 for d in cell_dirs(workdir.path / "ck")), 120, "step 20")
    os.kill(_worker_pid(cell_dirs(workdir.path / "ck")[0]), signal.SIGKILL)
    proc.wait(timeout=60)
    result = result_of((workdir.path / "run.log").read_text())
    assert result["status"] == "failed" and "crashed 1 times" in result["error"] and result["attempts"] == 1
    assert run_data(workdir.uri, result["run_id"])["status"] == "FAILED"


def test_checkpoint_request_preempts_and_the_resumed_run_is_identical(workdir, reference):
    """The cluster hook: request_checkpoint() (from a signal handler or a thread) -> checkpoint, status
    "preempted", run left RUNNING; running the cell again finishes it as if nothing happened."""
    import threading

    from tests.orchestrator.helpers import compose

    from orchestrator.cell import run as cell

    cfg = compose(*workdir.overrides, *CELL)

    def request_after_step_30():
        wait_for(lambda: any(newest_checkpoint_step(d) >= 30 for d in cell_dirs(workdir.path / "ck")), 120, "30")
        cell.request_checkpoint()

    trigger = threading.Thread(target=request_after_step_30, daemon=True)
    trigger.start()
    first = cell.run_cell(cfg)
    trigger.join()
    assert first.status == "preempted" and not cell.checkpoint_requested()  # honoured and cleared
    assert run_data(workdir.uri, first.run_id)["status"] == "RUNNING"
    assert not (Path(first.cell_dir) / "done.json").exists()
    second = cell.run_cell(cfg)
    assert second.status == "finished" and second.run_id == first.run_id
    _check_same_as_reference(workdir, second.to_dict(), reference)
