"""Running a local sweep's cells as processes, as many at once as the GPU pool lends GPUs, with one progress line.

    outcomes = run_jobs(jobs, GpuPool(ids, per_cell))   # each Job: a command, its log file, a label

Each job's process starts in a session of its own with CUDA_VISIBLE_DEVICES set to the GPUs it got, its output in its
log file; when it ends, however it ended, its GPUs go to the next job, so a failed cell stops nothing else. One line
tells the sweep (rewritten in place in a terminal, printed at each change in a log):

    [amdnn] sweep: 3 of 8 done (2 finished, 1 failed), 2 running (GPUs 0,1), 3 waiting; 4m10s; about 8m20s left

Ctrl-C (or SIGTERM) reaches this process only; it is forwarded to every running cell's process group as a terminal
would send it, each cell checkpoints and stops (run_cell), and run_jobs waits for them before it re-raises. A second
Ctrl-C kills them at once. The time left is the mean time of the cells trained so far, applied to the cells running
and waiting, over the cells that run at once.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from orchestrator.cell.progress import duration
from orchestrator.sweep.gpu_pool import GpuPool


@dataclass
class Job:
    index: int
    label: str                     # "lenet5 x am16 (digits, seed 0)"
    command: list[str]
    log: Path                      # the process's stdout and stderr
    env: dict = field(default_factory=dict)   # added to this process's environment


@dataclass
class Outcome:
    job: Job
    gpus: tuple[str, ...]
    returncode: int
    seconds: float
    started: float                 # time.time() at its start, for the record


class Stopped(SystemExit):
    """SIGTERM to the sweep: raised in the main thread, forwarded to the cells, re-raised when they have stopped."""


def _terminated(signum, frame) -> None:
    raise Stopped(128 + signum)


class SweepLine:
    """The sweep's one progress line."""

    def __init__(self, total: int, at_once: int, out: TextIO) -> None:
        self.total, self.at_once, self.out = total, at_once, out
        self.tty = out.isatty()
        self.t0 = time.monotonic()
        self.trained: list[float] = []     # seconds of each cell that trained (not skipped as already finished)
        self.finished = self.failed = 0
        self.shown = ""

    def text(self, running: dict[int, tuple[tuple[str, ...], float]], waiting: int) -> str:
        done = self.finished + self.failed
        gpus = ",".join(g for ids, _ in sorted(running.values()) for g in ids)
        line = (f"[amdnn] sweep: {done} of {self.total} done ({self.finished} finished, {self.failed} failed), "
                f"{len(running)} running" + (f" (GPUs {gpus})" if gpus else "") + f", {waiting} waiting; "
                f"{duration(time.monotonic() - self.t0)}")
        if self.trained and (running or waiting):
            mean = sum(self.trained) / len(self.trained)
            now = time.monotonic()
            work = waiting * mean + sum(max(0.0, mean - (now - t)) for _, t in running.values())
            line += f"; about {duration(work / max(1, min(self.at_once, len(running) + waiting)))} left"
        return line

    def show(self, text: str) -> None:
        """In a terminal the line is rewritten in place every call; in a log it is printed when it changes."""
        if self.tty:
            self.out.write("\r" + text + "\033[K")
            self.out.flush()
        elif text.split(";")[0] != self.shown.split(";")[0]:  # the counts changed, not only the clock
            print(text, file=self.out, flush=True)
        self.shown = text

    def say(self, text: str) -> None:
        """A line of its own (a cell started or ended), above the progress line."""
        if self.tty:
            self.out.write("\r\033[K")
        print(text, file=self.out, flush=True)
        if self.tty and self.shown:
            self.show(self.shown)


def run_jobs(jobs: list[Job], pool: GpuPool, describe: Callable[[Outcome], tuple[str, bool, bool]] | None = None,
             out: TextIO | None = None, poll_s: float = 0.2) -> list[Outcome]:
    """Run every job, pool.at_once at a time, each with its own GPUs; return their outcomes in the jobs' order.
    `describe(outcome)` -> (the line that says how a job ended, whether it finished, whether it trained), for the
    sweep's counts and its estimate; without it, exit status 0 is a trained, finished job."""
    out = out or sys.stdout
    line = SweepLine(len(jobs), pool.at_once, out)
    waiting = list(jobs)
    running: dict[int, tuple[Job, subprocess.Popen, tuple[str, ...], float, float]] = {}
    outcomes: dict[int, Outcome] = {}
    mine = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if mine:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        while waiting or running:
            while waiting and (gpus := pool.take()) is not None:
                job = waiting.pop(0)
                running[job.index] = (job, _start(job, gpus), gpus, time.monotonic(), time.time())
                line.say(f"[amdnn] {job.label}: started on GPU {','.join(gpus)}; output in {job.log}")
            for index, (job, proc, gpus, t0, started) in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[index]
                pool.give_back(gpus)
                outcome = Outcome(job, gpus, code, time.monotonic() - t0, started)
                outcomes[index] = outcome
                said, ok, trained = (describe(outcome) if describe else
                                     (f"[amdnn] {job.label}: exit status {code}", code == 0, code == 0))
                line.finished += ok
                line.failed += not ok
                if trained:
                    line.trained.append(outcome.seconds)
                line.say(said)
            line.show(line.text({i: (r[2], r[3]) for i, r in running.items()}, len(waiting)))
            time.sleep(poll_s)
    except (KeyboardInterrupt, Stopped) as stop:
        _stop_all([r[1] for r in running.values()], signal.SIGINT if isinstance(stop, KeyboardInterrupt)
                  else signal.SIGTERM, line)
        raise
    finally:
        if mine:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if line.tty:
            out.write("\n")
    return [outcomes[j.index] for j in jobs]


def _start(job: Job, gpus: tuple[str, ...]) -> subprocess.Popen:
    job.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **job.env, "CUDA_VISIBLE_DEVICES": ",".join(gpus)}
    with open(job.log, "ab") as log:
        # A session of its own: a terminal's Ctrl-C reaches the launcher alone, which forwards it once to each cell.
        return subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def _stop_all(procs: list[subprocess.Popen], signum: int, line: SweepLine) -> None:
    """Send `signum` to each cell's process group (its run_cell and training process), as a terminal would; wait for
    them to checkpoint and leave. A second Ctrl-C kills what is left."""
    line.say(f"[amdnn] stopping {len(procs)} running cell(s) at their next checkpoint (Ctrl-C again to kill them now)")
    for proc in procs:
        _signal_group(proc, signum)
    try:
        for proc in procs:
            proc.wait()
    except KeyboardInterrupt:
        for proc in procs:
            _signal_group(proc, signal.SIGKILL)
        for proc in procs:
            proc.wait()


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass
