"""Running a local sweep's cells as processes, as many at once as the GPU pool lends GPUs, with one progress line.

    outcomes = run_jobs(jobs, GpuPool(ids, per_cell))   # each Job: a command, its log file, a label

Each job's process starts in a session of its own with CUDA_VISIBLE_DEVICES set to the GPUs it got, its output in its
log file; when it ends, however it ended, its GPUs go to the next job, so a failed cell stops nothing else. One line
tells the sweep (rewritten in place in a terminal, printed at each change in a log):

    [amdnn] sweep: 3 of 8 done (2 finished, 1 failed), 2 running (GPUs 0,1), 3 waiting; 4m10s; about 8m20s left

Ctrl-C (or SIGTERM) reaches this process only; it is forwarded to every running cell's process group as a terminal
would send it, each cell checkpoints and stops (run_cell), and run_jobs waits for them, says how each ended and which
never started, and raises Stopped (a SystemExit: no traceback). A second Ctrl-C kills them at once. Both are read as
flags (common/interrupts), so that a signal arriving while the cells are being stopped cannot interrupt that. The time
left is the mean time of the cells trained so far, applied to the cells running
and waiting, over the cells that run at once.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from orchestrator.cell.progress import duration
from orchestrator.common.interrupts import StopSignals, StoppedBySignal
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


class Stopped(StoppedBySignal):
    """Ctrl-C or SIGTERM to the sweep, raised once its running cells have stopped (or been killed) and been told."""

    def __init__(self, signum: int, stopped: list[tuple[Outcome, bool]], not_started: list[Job]) -> None:
        super().__init__(signum)
        self.stopped = stopped              # each cell that was running, and whether it was killed
        self.not_started = not_started


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
             out: TextIO | None = None, poll_s: float = 0.2,
             describe_stop: Callable[[Outcome, bool], str] | None = None) -> list[Outcome]:
    """Run every job, pool.at_once at a time, each with its own GPUs; return their outcomes in the jobs' order.
    `describe(outcome)` -> (the line that says how a job ended, whether it finished, whether it trained), for the
    sweep's counts and its estimate; without it, exit status 0 is a trained, finished job. On Ctrl-C or SIGTERM,
    `describe_stop(outcome, killed)` says where a running job stopped; then Stopped is raised."""
    out = out or sys.stdout
    line = SweepLine(len(jobs), pool.at_once, out)
    waiting = list(jobs)
    running: dict[int, tuple[Job, subprocess.Popen, tuple[str, ...], float, float]] = {}
    outcomes: dict[int, Outcome] = {}
    with StopSignals() as signals:
        try:
            while (waiting or running) and signals.first is None:
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
        except KeyboardInterrupt:  # SIGINT through a handler not ours (StopSignals records only where none is set)
            signals.note(signal.SIGINT)
        if line.tty:
            out.write("\n")
        if signals.first is None:
            return [outcomes[j.index] for j in jobs]
        # still inside: a Ctrl-C while the cells stop or while this says how they ended is counted, not raised
        killed = _stop_all([r[1] for r in running.values()], signals, line)
        stopped = [(Outcome(job, gpus, proc.returncode, time.monotonic() - t0, started), proc.pid in killed)
                   for job, proc, gpus, t0, started in running.values()]
        for outcome, was_killed in stopped:
            line.say(describe_stop(outcome, was_killed) if describe_stop else
                     f"[amdnn] {outcome.job.label}: " + ("killed" if was_killed else
                                                         f"stopped (exit status {outcome.returncode})"))
        for job in waiting:
            line.say(f"[amdnn] {job.label}: not started")
        raise Stopped(signals.first, stopped, waiting)


def _start(job: Job, gpus: tuple[str, ...]) -> subprocess.Popen:
    job.log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **job.env, "CUDA_VISIBLE_DEVICES": ",".join(gpus)}
    with open(job.log, "ab") as log:
        # A session of its own: a terminal's Ctrl-C reaches the launcher alone, which forwards it once to each cell.
        return subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)


def _stop_all(procs: list[subprocess.Popen], signals: StopSignals, line: SweepLine, poll_s: float = 0.1) -> set[int]:
    """Send the stop signal to each cell's process group (its run_cell and training process), as a terminal would;
    wait for them to checkpoint and leave. A second Ctrl-C (or SIGTERM) kills what is left: the pids killed."""
    line.say(f"[amdnn] {signals.name()}: stopping {len(procs)} running cell(s) at their next checkpoint "
             f"(Ctrl-C again to kill them now)")
    for proc in procs:
        _signal_group(proc, signals.first)
    while any(proc.poll() is None for proc in procs):
        if signals.again():
            left = [proc for proc in procs if proc.poll() is None]
            line.say(f"[amdnn] {signals.name()} again: killing the {len(left)} cell(s) still running; each resumes "
                     f"from its last checkpoint")
            for proc in left:
                _signal_group(proc, signal.SIGKILL)
            for proc in left:
                proc.wait()
            return {proc.pid for proc in left}
        time.sleep(poll_s)
    return set()


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass
