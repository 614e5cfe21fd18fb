"""Progress of a training cell: a tqdm bar in a terminal, one plain line per epoch in a batch log, with the cell's
place in a local sweep (set by orchestrator.sweep.progress through POSITION_VARIABLE) and the time left in the cell.

The epoch line's times are the ones the run logs (orchestrator.cell.trainer defines them): "train 5.1s" is
epoch_time_s, the epoch's training steps over every attempt; "eval 1.4s" is eval_time_s, its test-set evaluation.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Mapping

from tqdm import tqdm

from orchestrator.config.cell import CellConfig

POSITION_VARIABLE = "AMDNN_SWEEP_POSITION"   # "3/8": set by a local sweep (sweep.progress)


def duration(seconds: float) -> str:
    """1h02m, 4m10s, 12s."""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    def __init__(self, cfg: CellConfig, epochs: int, steps_per_epoch: int, state: Any):
        self.label = f"{cfg.model.name}/{cfg.mult.name}/{cfg.dataset.name} s{cfg.seed}"
        position = os.environ.get(POSITION_VARIABLE)
        self.prefix = f"[cell {position}] " if position else ""
        self.epochs, self.spe = epochs, steps_per_epoch
        self.epoch_times: list[float] = []   # training and evaluation seconds of each epoch ended in this process
        self.bar = None
        if sys.stderr.isatty():
            self.bar = tqdm(total=epochs * steps_per_epoch, initial=state.global_step, desc=self.label,
                            unit="step", dynamic_ncols=True, file=sys.stderr)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def restart(self, state: Any) -> None:
        """After a rollback: the bar goes back to the checkpoint's step."""
        if self.bar is not None:
            self.bar.n = state.global_step
            self.bar.refresh()

    def epoch_end(self, state: Any, metrics: Mapping[str, float], seconds: float, eval_seconds: float) -> None:
        """`seconds`: the epoch's training time (epoch_time_s); `eval_seconds`: its evaluation (eval_time_s)."""
        self.epoch_times.append(seconds + eval_seconds)
        left = sum(self.epoch_times) / len(self.epoch_times) * (self.epochs - int(metrics["epoch"]))
        line = (f"{self.prefix}{self.label} epoch {int(metrics['epoch'])}/{self.epochs} loss {metrics['loss']:.4f} "
                f"acc {metrics['accuracy']:.4f} test_acc {metrics['test_accuracy']:.4f} lr {metrics['lr']:.3g} "
                f"train {seconds:.1f}s eval {eval_seconds:.1f}s"
                + (f", about {duration(left)} left in this cell" if left > 0 else ""))
        if self.bar is not None:
            self.bar.set_postfix(loss=f"{metrics['loss']:.3f}", test_acc=f"{metrics['test_accuracy']:.3f}")
        else:
            print(line, flush=True)  # stdout: the job's log

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
