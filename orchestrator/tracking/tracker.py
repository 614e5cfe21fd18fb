"""One MLflow run per cell, fed through a durable local queue so a tracking outage never loses or kills anything.

Every record (run start with params and tags, an epoch's metrics, tags, the final status) is first appended and
fsynced to CELL_DIR/tracking-queue.jsonl (orchestrator.tracking.queue), then sent by this process, or, in
single-writer mode inside a job, by an importer (orchestrator.tracking.mode, orchestrator.tracking.importer). Sending
retries with backoff; what cannot be sent stays queued and goes with the next flush (the next epoch, the end of the
cell, or any later run of the same cell, even with another tracking URI). Sending is idempotent
(orchestrator.tracking.writer), so a crash between "sent" and "marked sent" logs nothing twice.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from orchestrator.common import paths
from orchestrator.common.cellfiles import job_id
from orchestrator.tracking.dashboard import ENERGY_KEY, FINAL_KEY, POWER_KEY  # noqa: F401 - re-exported
from orchestrator.tracking.mode import AUTO, QUEUE, QUEUEING, resolve
from orchestrator.tracking.queue import CellQueue, flocked, register, writer_lock_path
from orchestrator.tracking.writer import (EPOCH_KEY, TAG_CELL, Cell, StoreWriter,  # noqa: F401 - re-exported
                                         read_run_cache)

log = logging.getLogger(__name__)

TAG_DEFINING = "amdnn.defining_config"   # the canonical JSON the identity hashes: what the results table groups by


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """{"train": {"optimizer": {"lr": 0.1}}} -> {"train.optimizer.lr": "0.1"} (MLflow params are strings)."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else str(value)
    return out


class Tracker:
    """The MLflow side of one cell. Only one process appends to a cell's queue at a time (the cell lock sees to it);
    training appends records while a background thread sends them (`flush_background`), so a slow or locked store
    (MLflow waits up to 20 s on a locked SQLite file) never holds up a training step. Under run_cell's supervision
    the training process only appends and run_cell sends (`only_queue`, `another_appends`).

    How records reach the store depends on the tracking mode (orchestrator.tracking.mode): direct, this process sends
    them; single_writer in a scheduler's job, it never opens the store and only queues (the queue is entered in the
    store's register for the importers); single_writer elsewhere (cluster=local), it sends them under the store's
    writer lock, as one of the importers; queue, it only queues, in a job or not."""

    def __init__(self, uri: str, experiment: str, identity: str, cell_dir: Path, run_name: str | None = None,
                 mode: str = AUTO):
        self.uri, self.experiment, self.identity = uri, experiment, identity
        self.cell_dir, self.run_name = Path(cell_dir), run_name
        self.mode = resolve(mode, uri)
        single_writer = self.mode.name in QUEUEING
        self.db = paths.sqlite_path(uri)
        # False: a job of single-writer mode, or any cell of queue mode, only queues
        self.sends = not single_writer or job_id() is None and self.mode.name != QUEUE
        self.writer_lock = writer_lock_path(self.db) if single_writer and self.db is not None else None
        self.queue = CellQueue(self.cell_dir)
        self.queue_path = self.queue.path
        self._registered = not single_writer
        # While True another process appends to the queue (the cell's training process, whose records its supervisor
        # sends): a send then moves the offset and leaves the queue whole, since only the appender may empty it.
        self.another_appends = False
        self._next_try = 0.0      # monotonic time before which a flush does not even try (after a failure)
        self._backoff = 1.0
        self._io = threading.Lock()        # the queue file: appends vs. emptying it after a send
        self._sending = threading.Lock()   # one flush at a time
        self._thread: threading.Thread | None = None
        # MLflow's own HTTP retries back off for minutes; ours are bounded and keep training going meanwhile.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")

    @property
    def cell(self) -> Cell:
        return Cell(self.identity, self.experiment, self.cell_dir, self.run_name)

    # -- the queue --------------------------------------------------------------------------------------------
    def _append(self, record: dict) -> None:
        record.setdefault("time_ms", int(time.time() * 1000))
        with self._io:
            self.queue.append(record)
        if not self._registered and self.db is not None:
            register(self.db, self.identity, self.cell_dir, self.experiment, self.run_name)
            self._registered = True

    def pending(self) -> list[dict]:
        """Queued records not yet in the store."""
        return self.queue.unsent()[0]

    # -- what the trainer and the cell call ---------------------------------------------------------------------
    def start(self, params: Mapping[str, str], tags: Mapping[str, str], launch: Mapping | None = None) -> None:
        """Queue the run's start; `launch` (tracking.launches) nests the run under its launch's run."""
        record = {"op": "start", "params": dict(params), "tags": dict(tags)}
        if launch:
            record["launch"] = dict(launch)
        self._append(record)

    def log_metrics(self, step: int, metrics: Mapping[str, float], check: str) -> None:
        """Queue metrics at `step`; `check` is the key whose presence at that step means they are logged."""
        self._append({"op": "metrics", "step": int(step), "check": check,
                      "metrics": {k: float(v) for k, v in metrics.items()}})

    def log_epoch(self, step: int, metrics: Mapping[str, float]) -> None:
        self.log_metrics(step, {**metrics}, check=EPOCH_KEY)

    def log_dataset(self, dataset: Mapping[str, str]) -> None:
        """Queue the run's dataset input: name, digest, source_type, source, schema, profile (mlflow.entities.Dataset's
        fields; orchestrator.cell.run_facts.dataset_input makes them)."""
        self._append({"op": "dataset", "dataset": dict(dataset)})

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self._append({"op": "tags", "tags": {k: str(v) for k, v in tags.items()}})

    def log_artifacts(self, local_dir: Path, artifact_path: str) -> None:
        """Queue the files of local_dir (in the cell folder, kept there) as the run's artifacts under artifact_path;
        sending them again replaces the same files, so a repeated send changes nothing."""
        self._append({"op": "artifacts", "dir": str(local_dir), "path": artifact_path})

    def end(self, status: str) -> None:
        self._append({"op": "end", "status": status})

    def only_queue(self) -> None:
        """This process only queues; the process that started it sends (orchestrator.cell.run: the supervisor of a
        cell's training process, which has MLflow loaded already: the training process then does not import it, ~5
        CPU seconds of its start, unless system_metrics=true, whose samplers are MLflow's)."""
        self.sends = False

    @property
    def run_id(self) -> str | None:
        return read_run_cache(self.cell_dir).get(self.uri)

    def flush_background(self) -> None:
        """Send what is queued from a background thread, unless a send is already under way (or this process only
        queues)."""
        if not self.sends or self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self.flush, name="amdnn-tracking", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a background send (one attempt: bounded by the store's own timeouts); what it could not send
        stays queued for the next flush."""
        if self._thread is not None:
            self._thread.join()

    def flush(self, patience_s: float = 0.0, force: bool = False) -> bool:
        """Send what is queued; retry with backoff for up to `patience_s`. True when nothing is left for this process
        to send (in a job of single-writer mode: always, the importers send).

        Never raises for a tracking failure: it is logged and the records stay queued. After a failure, flushes
        without `force` are skipped until a growing back-off delay has passed, so a dead server costs nothing.
        """
        if not self.sends:
            return True
        with self._sending:
            return self._flush(patience_s, force)

    def _flush(self, patience_s: float, force: bool) -> bool:
        if not self.pending():
            return True
        if not force and time.monotonic() < self._next_try:
            return False
        deadline = time.monotonic() + patience_s
        delay = 0.5
        while True:
            try:
                sent = self._send(max(0.0, deadline - time.monotonic()))
            except Exception as e:  # noqa: BLE001 - any store/server error: keep the records, never kill training
                if time.monotonic() + delay > deadline:
                    self._next_try = time.monotonic() + self._backoff
                    self._backoff = min(self._backoff * 2, 300.0)
                    log.warning("MLflow at %s unavailable (%s: %s); %d record(s) kept in %s", self.uri,
                                type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "", len(self.pending()),
                                self.queue_path)
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            self._backoff = 1.0
            self._next_try = 0.0
            return sent and not self.pending()

    def _send(self, lock_wait_s: float) -> bool:
        """Send what is queued, once; False if another writer holds the store (single-writer mode): it imports
        this queue too. Raises on a store failure."""
        with contextlib.ExitStack() as held:
            if self.writer_lock is not None and not held.enter_context(flocked(self.writer_lock, lock_wait_s)):
                return False
            held.enter_context(self.queue.sending())
            records, offset = self.queue.unsent()
            writer = StoreWriter(self.uri)
            try:
                writer.write(self.cell, records)
                writer.commit()
            finally:
                writer.close()
            with self._io:
                if self.another_appends:
                    self.queue.mark_sent(offset)
                else:
                    self.queue.compact(offset)
        return True
