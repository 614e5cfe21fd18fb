"""Stopping a cell's training process on Ctrl-C or SIGTERM, and saying where it stopped.

    killed = stop_worker(proc, signals)           # SIGTERM to it: it checkpoints at its next step and leaves; killed
                                                  # at once on a second Ctrl-C (signals.again()), or after GRACE_S
    raise CellStopped(signum, where_stopped(cell_dir, killed))

The text of `where_stopped` ("stopped in epoch 2 at step 120 of it (global step 1320); its checkpoint is written")
comes from the training process's own `preempted` event (cell/worker), so it says what the checkpoint holds. A
launcher prints it for each cell, with the command that resumes them (sweep/launching.resume_hint).
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from orchestrator.common import cellfiles
from orchestrator.common.interrupts import StoppedBySignal, StopSignals

GRACE_S = 60.0     # the longest a training process may take to reach its next step and checkpoint


class CellStopped(StoppedBySignal):
    """The cell was stopped by a signal (checkpointed, or killed on a second one); `where`: the sentence saying so."""

    def __init__(self, signum: int, where: str) -> None:
        super().__init__(signum)
        self.where = where


def stop_worker(proc: subprocess.Popen, signals: StopSignals, poll_s: float = 0.1) -> bool:
    """Ask the training process to checkpoint and leave; kill it on a second stop signal or after GRACE_S. True if
    killed. A stop raised by a handler not ours while waiting kills it too: nothing is left orphaned."""
    try:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_S
        while proc.poll() is None:
            if signals.again() or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                return True
            time.sleep(poll_s)
        return False
    except BaseException:  # noqa: BLE001 - a second stop through someone else's handler: kill, then say so
        proc.kill()
        proc.wait()
        return True


def where_stopped(cell_dir: Path, since: float, killed: bool) -> str:
    """Where the cell stopped, from the training process's `preempted` event written after `since` (time.time())."""
    stops = [e for e in cellfiles.events(cell_dir) if e["event"] == "preempted" and e.get("time", 0) >= since]
    if killed or not stops:
        return "killed before it could checkpoint; it resumes from its last checkpoint"
    last = stops[-1]
    if "epoch" in last:
        return (f"stopped in epoch {last['epoch']} at step {last['step_in_epoch']} of it (global step "
                f"{last['global_step']}); its checkpoint is written")
    return f"stopped at global step {last.get('global_step')}; its checkpoint is written"
