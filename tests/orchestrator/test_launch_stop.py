"""Stopping `python launch.py` as a user does: SIGTERM to a single cell, and `timeout -s INT`'s SIGINT to the launcher
and its process group (twice within milliseconds) to a local sweep on fake GPUs. Each run must say where every cell
stopped (its epoch and step, from its checkpoint) and print the command that resumes it, with no traceback. A second
stop does not wait for a locked store."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path


from orchestrator.sweep.gpu_pool import FAKE_IDS_VARIABLE
from tests.orchestrator.helpers import (PYTHON, REPO, cell_dirs, env, newest_checkpoint_step,
                                        wait_for)

# Long enough to be stopped in the middle; checkpoints often, so that the test sees training under way.
LONG = ["train.epochs=50", "train.batch_size=32", "checkpoint.every_n_steps=5", "tracking_mode=single_writer"]


def _start(tmp_path: Path, *args: str, environment: dict | None = None) -> tuple[subprocess.Popen, list[str]]:
    """launch.py in a process group of its own (as a shell job), SIGINT handled as in a terminal."""
    overrides = [f"checkpoint_root={tmp_path / 'ck'}", f"tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    command = [PYTHON, str(REPO / "launch.py"), *args, *overrides]
    proc = subprocess.Popen(command, cwd=tmp_path, env=environment or env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, process_group=0,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, command


def _training(tmp_path: Path, cells: int) -> bool:
    dirs = cell_dirs(tmp_path / "ck") if (tmp_path / "ck").exists() else []
    return len(dirs) == cells and all(newest_checkpoint_step(d) >= 0 for d in dirs)


def _wait_training(proc: subprocess.Popen, tmp_path: Path, cells: int) -> None:
    try:
        wait_for(lambda: _training(tmp_path, cells) or proc.poll() is not None, 300, "training under way", poll=0.2)
    finally:
        if proc.poll() is not None:
            raise AssertionError(proc.communicate()[0][-4000:])


def test_sigterm_to_a_single_cell_says_where_it_stopped_and_how_to_resume(tmp_path):
    proc, command = _start(tmp_path, "model=lenet300", *LONG)
    _wait_training(proc, tmp_path, 1)
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGTERM, out[-4000:]
    assert "stopped in epoch" in out and "its checkpoint is written" in out, out[-4000:]
    assert "Resume with the same command" in out and f"python3 {command[1]} model=lenet300" in out, out[-4000:]
    assert "Traceback" not in out, out[-4000:]


def test_timeout_s_int_to_a_local_sweep_stops_every_cell_at_a_checkpoint(tmp_path):
    """SIGINT to the launcher and then to its whole group, as `timeout -s INT` sends it: one stop, not a kill."""
    environment = {**env(), FAKE_IDS_VARIABLE: "f0,f1"}
    proc, command = _start(tmp_path, "-m", "model=lenet300", "mult=native,am16", *LONG,
                           f"hydra.sweep.dir={tmp_path / 'sweep'}", environment=environment)
    _wait_training(proc, tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.time()
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, out[-4000:]
    assert "stopping 2 running cell(s) at their next checkpoint" in out and "killing" not in out, out[-4000:]
    assert out.count("stopped in epoch") == 2 and "Resume with the same command" in out, out[-4000:]
    assert "python3 " + " ".join(command[1:3]) in out, out[-4000:]
    assert "Traceback" not in out and time.time() - t0 < 100, out[-4000:]


def test_a_second_sigterm_leaves_at_once_when_the_store_is_locked(tmp_path):
    """Another process holds the SQLite store locked (each statement then waits up to 30 s): a stopped cell says where
    it stopped at once, and a second SIGTERM makes launch.py leave without waiting for the store, the cell's last
    records (its KILLED end) queued for its next launch."""
    from orchestrator.common import cellfiles
    from orchestrator.tracking.queue import CellQueue

    proc, _ = _start(tmp_path, "model=lenet300", *LONG)
    _wait_training(proc, tmp_path, 1)
    (cell_dir,) = cell_dirs(tmp_path / "ck")
    # The store made (writer.create_sqlite_store renames a new file into place: a lock taken before would be on the
    # file it replaced)
    wait_for(lambda: (tmp_path / "mlflow.db.ready").exists(), 120, "the store", poll=0.1)
    store = sqlite3.connect(str(tmp_path / "mlflow.db"), timeout=60, isolation_level=None)
    store.execute("BEGIN EXCLUSIVE")  # nobody else reads or writes until released
    try:
        time.sleep(3.0)  # the supervisor's next send (every 2 s) is under way, waiting on the lock
        proc.send_signal(signal.SIGTERM)
        wait_for(lambda: any(e["event"] == "killed" for e in cellfiles.events(cell_dir)) or proc.poll() is not None,
                 120, "the cell stopped", poll=0.1)
        time.sleep(1.5)  # a second stop, not the first one delivered twice (interrupts.DUPLICATE_S)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        out = proc.communicate(timeout=120)[0]
        left_after = time.monotonic() - t0
    finally:
        store.rollback()
        store.close()
    assert proc.returncode == 128 + signal.SIGTERM, out[-4000:]
    assert left_after < 10, f"{left_after:.1f} s after the second SIGTERM:\n{out[-4000:]}"
    assert "stopped in epoch" in out and "stopped again: the cell's last tracking records stay in" in out, out[-4000:]
    assert "Traceback" not in out, out[-4000:]
    assert {"op": "end", "status": "KILLED"}.items() <= CellQueue(cell_dir).unsent()[0][-1].items()
