"""One MLflow run per cell, fed through a durable local queue so a tracking outage never loses or kills anything.

Every record (run start with params and tags, an epoch's metrics, tags, the final status) is first appended and
fsynced to CELL_DIR/tracking-queue.jsonl, then sent. Sending retries with backoff; what cannot be sent stays queued
and goes with the next flush (the next epoch, the end of the cell, or any later run of the same cell, even with
another tracking URI). Sending is idempotent: the run is found by its identity tag, params already set are not
re-sent, and an epoch whose step is already logged is not logged again, so a crash between "sent" and "dequeued"
logs nothing twice.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from ops.atomic import write_bytes
from ops.multipliers import LUT_NAME, LUT_PREFIX

from . import paths
from .cellfiles import QUEUE, RUN_CACHE, job_id
from .identity import canonical_json, defining_config

log = logging.getLogger(__name__)

TAG_CELL = "amdnn.cell"          # the cell identity: how a resumed cell finds its run
EPOCH_KEY = "epoch"              # logged with every epoch's metrics; its steps say which epochs are already in
FINAL_KEY = "final_test_accuracy"
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


def mult_label(cfg: Mapping[str, Any]) -> str:
    """The multiplier as the results table names it: the mode, or lut:<table file name>."""
    mult = cfg["mult"]
    return LUT_PREFIX + os.path.basename(str(mult["table"])) if mult["name"] == LUT_NAME else str(mult["name"])


def base_tags(identity: str, cfg: Mapping[str, Any]) -> dict[str, str]:
    tags = {TAG_CELL: identity, "amdnn.model": cfg["model"]["name"], "amdnn.mult": mult_label(cfg),
            "amdnn.dataset": cfg["dataset"]["name"], "amdnn.seed": str(cfg["seed"]), "amdnn.host": socket.gethostname(),
            TAG_DEFINING: canonical_json(defining_config(cfg))}
    if job_id():
        tags["amdnn.job_id"] = job_id()  # type: ignore[assignment]
    return tags


def _create_sqlite_store(db: Path) -> None:
    """Create the SQLite store `db` once, safely, and leave a DB.ready marker beside it.

    MLflow creates a store by running its schema migrations, which are not one transaction: two processes doing it
    at once collide, and a process killed half-way leaves a store no later process can open. So the first process
    builds the schema in a temporary file under a lock and renames it into place; the others wait for the marker.
    """
    from filelock import FileLock
    from mlflow.tracking import MlflowClient

    ready = db.with_name(db.name + ".ready")
    db.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(db) + ".lock", timeout=300):
        if ready.exists():
            return
        for stale in db.parent.glob(f".{db.name}.creating-*"):  # left by a creator that was killed
            stale.unlink(missing_ok=True)
        if not db.exists():
            tmp = db.with_name(f".{db.name}.creating-{os.getpid()}")
            MlflowClient(f"sqlite:///{tmp}").search_experiments(max_results=1)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, db)
        else:  # made by MLflow itself (mlflow ui, another tool): let it check or upgrade the schema, once
            MlflowClient(f"sqlite:///{db}").search_experiments(max_results=1)
        ready.touch()


class Tracker:
    """The MLflow side of one cell. Only one process uses a cell's tracker at a time (the cell lock sees to it);
    within it, training appends records while a background thread sends them (`flush_background`), so a slow or
    locked store (MLflow waits up to 20 s on a locked SQLite file) never holds up a training step."""

    def __init__(self, uri: str, experiment: str, identity: str, cell_dir: Path, run_name: str | None = None):
        self.uri, self.experiment, self.identity = uri, experiment, identity
        self.cell_dir, self.run_name = Path(cell_dir), run_name
        self.queue_path = self.cell_dir / QUEUE
        self._client = None
        self._run_id: str | None = None
        self._next_try = 0.0      # monotonic time before which a flush does not even try (after a failure)
        self._backoff = 1.0
        self._io = threading.Lock()        # the queue file: appends vs. the rewrite after a send
        self._sending = threading.Lock()   # one flush at a time
        self._thread: threading.Thread | None = None
        # MLflow's own HTTP retries back off for minutes; ours are bounded and keep training going meanwhile.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")

    # -- the queue --------------------------------------------------------------------------------------------
    def _append(self, record: dict) -> None:
        record.setdefault("time_ms", int(time.time() * 1000))
        self.cell_dir.mkdir(parents=True, exist_ok=True)
        with self._io, open(self.queue_path, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def pending(self) -> list[dict]:
        """Queued records not yet sent. A torn last line (crash mid-append) is dropped: the training it
        describes was not checkpointed yet, so it is redone and queued again."""
        if not self.queue_path.exists():
            return []
        records = []
        for line in self.queue_path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                log.warning("tracking queue %s: dropping a torn line", self.queue_path)
        return records

    def _dequeue(self, sent: int) -> list[dict]:
        """Drop the first `sent` records; return what is left (records appended meanwhile included)."""
        with self._io:
            remaining = self.pending()[sent:]
            write_bytes(self.queue_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in remaining).encode())
        return remaining

    # -- what the trainer and the cell call ---------------------------------------------------------------------
    def start(self, params: Mapping[str, str], tags: Mapping[str, str]) -> None:
        self._append({"op": "start", "params": dict(params), "tags": dict(tags)})

    def log_metrics(self, step: int, metrics: Mapping[str, float], check: str) -> None:
        """Queue metrics at `step`; `check` is the key whose presence at that step means they are logged."""
        self._append({"op": "metrics", "step": int(step), "check": check,
                      "metrics": {k: float(v) for k, v in metrics.items()}})

    def log_epoch(self, step: int, metrics: Mapping[str, float]) -> None:
        self.log_metrics(step, {**metrics}, check=EPOCH_KEY)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        self._append({"op": "tags", "tags": {k: str(v) for k, v in tags.items()}})

    def log_artifacts(self, local_dir: Path, artifact_path: str) -> None:
        """Queue the files of local_dir (in the cell folder, kept there) as the run's artifacts under artifact_path;
        sending them again replaces the same files, so a repeated send changes nothing."""
        self._append({"op": "artifacts", "dir": str(local_dir), "path": artifact_path})

    def end(self, status: str) -> None:
        self._append({"op": "end", "status": status})

    @property
    def run_id(self) -> str | None:
        if self._run_id is None:
            cached = self._read_cache()
            self._run_id = cached.get(self.uri)
        return self._run_id

    def flush_background(self) -> None:
        """Send what is queued from a background thread, unless a send is already under way."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self.flush, name="amdnn-tracking", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Wait for a background send (one attempt: bounded by the store's own timeouts); what it could not send
        stays queued for the next flush."""
        if self._thread is not None:
            self._thread.join()

    def flush(self, patience_s: float = 0.0, force: bool = False) -> bool:
        """Send what is queued; retry with backoff for up to `patience_s`. True when nothing is left.

        Never raises for a tracking failure: it is logged and the records stay queued. After a failure, flushes
        without `force` are skipped until a growing back-off delay has passed, so a dead server costs nothing.
        """
        with self._sending:
            return self._flush(patience_s, force)

    def _flush(self, patience_s: float, force: bool) -> bool:
        records = self.pending()
        if not records:
            return True
        if not force and time.monotonic() < self._next_try:
            return False
        deadline = time.monotonic() + patience_s
        delay = 0.5
        while True:
            try:
                sent = self._send(records)
            except Exception as e:  # noqa: BLE001 - any store/server error: keep the records, never kill training
                self._client = None
                if time.monotonic() + delay > deadline:
                    self._next_try = time.monotonic() + self._backoff
                    self._backoff = min(self._backoff * 2, 300.0)
                    log.warning("MLflow at %s unavailable (%s: %s); %d record(s) kept in %s", self.uri,
                                type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "", len(records),
                                self.queue_path)
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                records = self.pending()
                continue
            self._backoff = 1.0
            self._next_try = 0.0
            return not self._dequeue(sent)

    # -- MLflow -------------------------------------------------------------------------------------------------
    def _read_cache(self) -> dict:
        try:
            return json.loads((self.cell_dir / RUN_CACHE).read_text())
        except (OSError, ValueError):
            return {}

    def _connect(self):
        if self._client is None:
            from mlflow.tracking import MlflowClient

            db = paths.sqlite_path(self.uri)
            if db is not None and not db.with_name(db.name + ".ready").exists():
                _create_sqlite_store(db)
            client = MlflowClient(self.uri)
            client.search_experiments(max_results=1)
            self._client = client
        return self._client

    def _experiment_id(self, client) -> str:
        exp = client.get_experiment_by_name(self.experiment)
        if exp is not None:
            return exp.experiment_id
        try:
            return client.create_experiment(self.experiment)
        except Exception:  # another cell created it a moment ago
            exp = client.get_experiment_by_name(self.experiment)
            if exp is None:
                raise
            return exp.experiment_id

    def find_run(self, client=None):
        """This cell's run (by identity tag), or None."""
        client = client or self._connect()
        if self.run_id:
            try:
                run = client.get_run(self.run_id)
                if run.data.tags.get(TAG_CELL) == self.identity:
                    return run
            except Exception:  # noqa: BLE001 - cached id from another store: search by tag below
                pass
        exp = client.get_experiment_by_name(self.experiment)
        if exp is None:
            return None
        runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{TAG_CELL}` = '{self.identity}'",
                                  order_by=["attributes.start_time ASC"], max_results=1)
        return runs[0] if runs else None

    def _ensure_run(self, client, tags: Mapping[str, str] | None = None) -> str:
        run = self.find_run(client)
        if run is None:
            run = client.create_run(self._experiment_id(client), tags={TAG_CELL: self.identity, **(tags or {})},
                                    run_name=self.run_name)
        self._run_id = run.info.run_id
        cache = self._read_cache()
        if cache.get(self.uri) != self._run_id:
            cache[self.uri] = self._run_id
            write_bytes(self.cell_dir / RUN_CACHE, json.dumps(cache, indent=1).encode())
        return self._run_id

    def _send(self, records: list[dict]) -> int:
        """Send records in order; return how many were sent (all, or raise on the first failure)."""
        from mlflow.entities import Metric, Param, RunTag

        client = self._connect()
        run_id = self._ensure_run(client, next((r["tags"] for r in records if r["op"] == "start"), None))
        logged: dict[str, set[int]] = {}  # metric key -> steps already in the store, fetched when first needed
        for i, record in enumerate(records):
            op = record["op"]
            if op == "start":
                have = client.get_run(run_id).data.params
                # A param already set keeps its first value (MLflow refuses changes; paths may differ on resume).
                params = [Param(k, v[:6000]) for k, v in record["params"].items() if k not in have]
                for j in range(0, len(params), 100):
                    client.log_batch(run_id, params=params[j:j + 100])
                client.log_batch(run_id, tags=[RunTag(k, v) for k, v in record["tags"].items()])
                client.update_run(run_id, status="RUNNING")
            elif op == "metrics":
                check = record.get("check", EPOCH_KEY)
                if check not in logged:
                    logged[check] = {m.step for m in client.get_metric_history(run_id, check)}
                if record["step"] in logged[check]:
                    continue
                # One batch is one transaction in the SQL store: all of an epoch's metrics land, or none.
                client.log_batch(run_id, metrics=[Metric(k, v, record["time_ms"], record["step"])
                                                  for k, v in record["metrics"].items()])
                logged[check].add(record["step"])
            elif op == "tags":
                client.log_batch(run_id, tags=[RunTag(k, v) for k, v in record["tags"].items()])
            elif op == "artifacts":
                if Path(record["dir"]).is_dir():
                    client.log_artifacts(run_id, record["dir"], artifact_path=record["path"])
                else:
                    log.warning("tracking queue: artifacts folder %s is gone; not logged", record["dir"])
            elif op == "end":
                client.set_terminated(run_id, status=record["status"], end_time=record["time_ms"])
            else:
                log.warning("tracking queue: unknown record %r skipped", op)
        return len(records)
