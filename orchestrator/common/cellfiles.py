"""The files of a cell's folder (CHECKPOINT_ROOT/<cell name>/) that other tools read: one place names them.

    cell.json          identity, name and defining config (written once)
    run-config.json    the resolved config of the current launch (config.cell.CellConfig.to_json; paths may differ
                       between launches): what the training process reads and trusts
    done.json          present once the cell finished: final test accuracy, run id, steps, time
    events.jsonl       one line per attempt event: start, crash, preempted, finished, failed (host, job id, time)
    cell.lock          held by the one process running the cell
    checkpoints/  skips.json  tracking-queue.*  mlflow-run.json  final_weights.npz  last-good-epoch/
    artifacts/    the files logged with the run: record/, multiplier/, profile/, curves/, weights/
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ops.atomic import write_bytes


CELL = "cell.json"
RUN_CONFIG = "run-config.json"
DONE = "done.json"
EVENTS = "events.jsonl"
LOCK = "cell.lock"
SKIPS = "skips.json"                  # NaN-skipped global steps, rollback counts, collapse rollbacks (trainer)
LAST_GOOD_EPOCH = "last-good-epoch"   # a checkpoint store holding the newest healthy epoch end (trainer)
FINAL_WEIGHTS = "final_weights.npz"   # the trained model's variables by Keras path
QUEUE = "tracking-queue.jsonl"        # MLflow records, appended (orchestrator.tracking.queue)
QUEUE_SENT = "tracking-queue.sent"    # how far the queue is in the store
QUEUE_LOCK = "tracking-queue.lock"    # held by whoever sends the queue
RUN_CACHE = "mlflow-run.json"         # tracking URI -> MLflow run id of this cell
ARTIFACTS = "artifacts"               # files logged with the run, one folder per part (orchestrator.cell.artifacts)


def write_json(path: Path, data: Any) -> None:
    write_bytes(Path(path), json.dumps(data, indent=1, sort_keys=True).encode())


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def job_id() -> str | None:
    """The scheduler's id of the job this process runs in, if any."""
    return os.environ.get("SLURM_JOB_ID") or os.environ.get("PBS_JOBID")


def event(cell_dir: Path, kind: str, **details: Any) -> None:
    """Append one lifecycle event (fsynced: the status command and the resume cron read these)."""
    record = {"event": kind, "time": time.time(), "host": socket.gethostname(), "pid": os.getpid(),
              "job_id": job_id(), **details}
    with open(Path(cell_dir) / EVENTS, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def events(cell_dir: Path) -> list[dict]:
    out = []
    try:
        for line in (Path(cell_dir) / EVENTS).read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    except OSError:
        pass
    return out
