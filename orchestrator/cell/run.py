"""run_cell(cell) -> CellResult: the one entry point of a grid cell, for the local launcher and cluster jobs alike.

    result = run_cell(cell)         # a resolved CellConfig: find the cell's folder, skip if done, else train (resuming)
    request_checkpoint()            # from a signal handler or another thread: checkpoint soon, return "preempted"

A cell stopped from outside (SIGTERM to this process where nothing else handles it, as `kill` does to a local sweep,
or Ctrl-C) stops its training process at its next step (which checkpoints; a second Ctrl-C kills it), prints where it
stopped, marks its MLflow run KILLED and raises CellStopped (cell/stopping), a SystemExit with status 143 (SIGINT:
130); launching the cell again resumes it and marks the run RUNNING again.

The cell trains in a child process (`python -m orchestrator.cell.worker CELL_DIR`) that this process supervises: a crash
of the child (killed, segfault, bus error, out of memory) is retried from the last good checkpoint up to
retries.crashes times, and recorded (events.jsonl, MLflow tags). One process runs a cell at a time (a lock in the
cell's folder); a second launch of a running cell returns status "busy" without touching it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from filelock import FileLock, Timeout

from ops.atomic import write_bytes

from orchestrator.cell.stopping import CellStopped, stop_worker, where_stopped
from orchestrator.cell.worker import ANSWERS, SUPERVISOR_SENDS, run
from orchestrator.common import cellfiles, paths, permissions
from orchestrator.common.interrupts import StopSignals
from orchestrator.config.cell import CellConfig, resolve
from orchestrator.tracking.tracker import Tracker, flatten


@dataclass
class CellResult:
    identity: str
    name: str
    cell_dir: str
    status: str                      # finished | preempted | failed | busy
    test_accuracy: float | None = None
    run_id: str | None = None
    attempts: int = 0                # worker processes started by this call
    skipped: bool = False            # finished before this call: nothing trained
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class _CheckpointRequest:
    """A flag, not an Event: setting an attribute is safe inside a signal handler (no lock to deadlock on)."""

    requested = False


_REQUEST = _CheckpointRequest()  # process-wide by nature: one process runs one cell at a time


def request_checkpoint() -> None:
    """Ask the running cell to checkpoint at its next step and return status "preempted". Signal- and thread-safe."""
    _REQUEST.requested = True


def checkpoint_requested() -> bool:
    return _REQUEST.requested


def cell_dir_of(cfg: Any) -> Path:
    """The folder of the cell `cfg` describes (a CellConfig, or a composed config, resolved here)."""
    return Path((cfg if isinstance(cfg, CellConfig) else resolve(cfg)).cell_dir)


def run_cell(cell: CellConfig | Any, supervise: bool = True, tags: Mapping[str, str] | None = None) -> CellResult:
    """Run (or resume, or skip if done) the cell. `cell` is resolved at launch (config.cell.resolve) and trusted here;
    a composed config (DictConfig or mapping, as older callers and the pickles of older jobs pass) is resolved once
    here, and raises ConfigError if invalid. Every other failure is a CellResult with status "failed".

    supervise=False trains in this process (no crash retry): for debugging and for tests that patch the trainer.
    `tags`: more tags for the run, sent with its start (a cluster job's: the ids of the jobs that ran the cell), so
    that they are in the store before the run's end is.
    """
    cell = cell if isinstance(cell, CellConfig) else resolve(cell)
    permissions.restrict(cell.share_with_group)  # before the cell's folder, store and queue exist
    identity, name, cell_dir = cell.identity, cell.name, Path(cell.cell_dir)
    cell_dir.mkdir(parents=True, exist_ok=True)
    result = CellResult(identity=identity, name=name, cell_dir=str(cell_dir), status="failed")
    uri = cell.tracking.uri
    tracker = Tracker(uri, cell.tracking.experiment, identity, cell_dir, run_name=name, mode=cell.tracking.mode)
    patience = cell.tracking.patience_s

    lock = FileLock(str(cell_dir / cellfiles.LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        result.status = "busy"
        result.error = f"another process is running this cell (lock {cell_dir / cellfiles.LOCK})"
        return result
    try:
        if not (cell_dir / cellfiles.CELL).exists():
            cellfiles.write_json(cell_dir / cellfiles.CELL, {"identity": identity, "name": name,
                                                             "defining_config": cell.defining_config()})
        done = cellfiles.read_json(cell_dir / cellfiles.DONE)
        if done and done.get("identity") == identity:
            if tags:
                tracker.set_tags(tags)
            tracker.flush(patience_s=patience, force=True)  # records an outage left queued go now
            result.status, result.skipped, result.test_accuracy = "finished", True, done.get("test_accuracy")
            result.run_id = tracker.run_id
            return result
        write_bytes(cell_dir / cellfiles.RUN_CONFIG, cell.to_json().encode())  # the worker's config, trusted
        # params and tags go with the first send: this process's while it supervises (_supervise_worker)
        tracker.start({**flatten(cell.as_dict()), **cell.layer_params()}, {**cell.tags(), **(tags or {})},
                      launch=cell.tracking.launch)
        if supervise:
            _supervise(cell, cell_dir, tracker, result)
        else:
            cellfiles.event(cell_dir, "start", attempt=1, pid=os.getpid())
            result.attempts = 1
            code = run(cell_dir, checkpoint_requested, tracker)
            result.status = ANSWERS.get(code, "failed")
        if result.status == "preempted":
            _REQUEST.requested = False  # honoured
        done = cellfiles.read_json(cell_dir / cellfiles.DONE)
        if result.status == "finished" and done:
            result.test_accuracy = done.get("test_accuracy")
        elif result.status == "failed" and result.error is None:
            failures = [e for e in cellfiles.events(cell_dir) if e["event"] == "failed"]
            result.error = failures[-1].get("error") if failures else "failed"
        if not tracker.flush(patience_s=patience, force=True):
            print(f"[amdnn] tracking store {uri} unavailable: records kept in {tracker.queue_path}; they are sent "
                  f"when this cell is launched again", file=sys.stderr, flush=True)
        result.run_id = tracker.run_id
        return result
    finally:
        lock.release()


SEND_EVERY_S = 2.0  # how often the supervisor sends what its training process queued (the dashboard's delay)


def _worker_gone(tracker: Tracker) -> None:
    """The worker has ended: its send under way finishes, and this process is the queue's one appender again."""
    tracker.close()
    tracker.another_appends = False


def _send_unless_stopped_again(tracker: Tracker, signals: StopSignals) -> None:
    """A stopped cell's last records (its KILLED end among them) sent, for up to a few seconds more than a send under
    way takes, unless a second stop signal comes first: then they stay queued, and the next launch of the cell sends
    them (the queue and the store are whole wherever a send is cut off)."""
    sender = threading.Thread(target=tracker.flush, kwargs={"patience_s": 5.0, "force": True}, daemon=True,
                              name="amdnn-tracking-last")
    sender.start()
    while sender.is_alive():
        if signals.again():
            print(f"[amdnn] stopped again: the cell's last tracking records stay in {tracker.queue_path}; the next "
                  "launch of the cell sends them", file=sys.stderr, flush=True)
            return
        sender.join(0.1)


def _worker_env() -> dict:
    env = dict(os.environ)
    root = str(paths.repo_root())
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's start-up banner would bury the epoch lines
    return env


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def _supervise(cell: CellConfig, cell_dir: Path, tracker: Tracker, result: CellResult) -> None:
    """Start the worker; restart it after a crash (bounded); forward checkpoint requests to it. Ctrl-C and SIGTERM,
    where nobody else handles them (cluster jobs turn SIGTERM into a checkpoint request: orchestrator.cluster.preempt),
    stop it at a checkpoint and raise CellStopped; a second Ctrl-C kills it, or, once it is gone, leaves the cell's
    last tracking records queued instead of waiting for a slow store."""
    with StopSignals() as signals:
        _supervise_worker(cell, cell_dir, tracker, result, signals)


def _supervise_worker(cell: CellConfig, cell_dir: Path, tracker: Tracker, result: CellResult,
                      signals: StopSignals) -> None:
    limit = cell.retries.crashes
    crashes = 0
    env = _worker_env()
    if tracker.sends:  # this process sends the worker's records: MLflow is loaded here already, not there
        env[SUPERVISOR_SENDS] = "1"
    else:  # one exported by whoever started this process is not ours to pass on: nobody here sends
        env.pop(SUPERVISOR_SENDS, None)
    while True:
        result.attempts += 1
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cell.worker", str(cell_dir)], env=env)
        started = time.time()
        cellfiles.event(cell_dir, "start", attempt=result.attempts, pid=proc.pid)
        forwarded = False
        tracker.another_appends = True
        next_send = 0.0
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if _REQUEST.requested and not forwarded:
                    proc.send_signal(signal.SIGUSR1)
                    forwarded = True
                if time.monotonic() >= next_send:  # what the worker queued reaches the store within SEND_EVERY_S
                    tracker.flush_background()
                    next_send = time.monotonic() + SEND_EVERY_S
            except BaseException as stop:  # Ctrl-C or SIGTERM through a handler not ours (a cell process's)
                status = getattr(stop, "code", None)
                signals.note(signal.SIGINT if isinstance(stop, KeyboardInterrupt) else
                             status - 128 if isinstance(status, int) and status > 128 else signal.SIGTERM)
            if signals.first is not None:  # do not orphan the worker: it checkpoints at its next step and leaves
                killed = stop_worker(proc, signals)
                # This process is the queue's one appender again. A send under way is not waited for here (its
                # records are whole either way: appends and a send's compaction take turns on the tracker's lock),
                # so the user reads where the cell stopped at once, not after a locked store's ~20-30 s.
                tracker.another_appends = False
                cellfiles.event(cell_dir, "killed", attempt=result.attempts, how=signals.name(), worker_killed=killed)
                where = where_stopped(cell_dir, started, killed)
                print(f"[amdnn] {cell.name}: {where}", flush=True)
                tracker.end("KILLED")
                _send_unless_stopped_again(tracker, signals)
                raise CellStopped(signals.first, where)
        _worker_gone(tracker)
        if code in ANSWERS:
            result.status = ANSWERS[code]
            return
        if forwarded:  # killed by the request itself before it could install its handler: its checkpoints stand
            result.status = "preempted"
            return
        crashes += 1
        how = _describe_exit(code)
        print(f"[amdnn] training process crashed ({how}); crash {crashes} of at most {limit} retries",
              file=sys.stderr, flush=True)
        cellfiles.event(cell_dir, "crash", attempt=result.attempts, how=how)
        tracker.set_tags({"amdnn.crashes": crashes, "amdnn.last_crash": how})
        if crashes > limit:
            result.status = "failed"
            result.error = f"training process crashed {crashes} times (last: {how}); retries.crashes={limit}"
            cellfiles.event(cell_dir, "failed", error=result.error)
            tracker.set_tags({"amdnn.error": result.error})
            tracker.end("FAILED")
            return
        tracker.flush(patience_s=1.0)
        time.sleep(min(2.0 ** (crashes - 1), 30.0))  # a node in trouble gets a moment before the retry
