"""A local sweep's progress: before each cell, which cell of how many, how many are done, and the time left.

    [amdnn] sweep: cell 3 of 8 (lenet5 x am16, digits, seed 0); 2 done (2 finished, 0 failed) in 4m10s; about 8m20s left

The estimate is the mean time of the cells this sweep trained so far, times the cells still to run (cells already
finished before the sweep take no time and are left out of the mean). The position also reaches the cell's training
process (AMDNN_SWEEP_POSITION), whose epoch lines then start with it and end with the time left in the cell.
"""
from __future__ import annotations

import os
import time

from orchestrator.cell.progress import POSITION_VARIABLE, duration


class SweepProgress:
    def __init__(self, cells: list[dict]) -> None:
        self.cells = cells
        self.t0 = time.monotonic()
        self.started: float | None = None
        self.trained: list[float] = []     # seconds of each cell trained by this sweep
        self.outcomes: dict[str, int] = {"finished": 0, "failed": 0}

    def start(self, index: int) -> str:
        """The line before cell `index` (0-based); sets the position for the cell's training process."""
        self.started = time.monotonic()
        total = len(self.cells)
        cell = self.cells[index] if index < total else {}
        os.environ[POSITION_VARIABLE] = f"{index + 1}/{total}"
        done = sum(self.outcomes.values())
        what = f" ({cell['model']} x {cell['mult']}, {cell['dataset']}, seed {cell['seed']})" if cell else ""
        line = (f"[amdnn] sweep: cell {index + 1} of {total}{what}; {done} done ({self.outcomes['finished']} finished, "
                f"{self.outcomes['failed']} failed) in {duration(time.monotonic() - self.t0)}")
        if self.trained:
            left = sum(self.trained) / len(self.trained) * (total - index)
            line += f"; about {duration(left)} left"
        return line

    def end(self, result: dict | None) -> None:
        """Record the outcome of the cell that just ran (launch_cell's CellResult dict, or None if it raised)."""
        status = (result or {}).get("status")
        self.outcomes["finished" if status == "finished" else "failed"] += status != "preempted"
        if self.started is not None and result and not result.get("skipped"):
            self.trained.append(time.monotonic() - self.started)
        self.started = None
