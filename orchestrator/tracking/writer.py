"""Writing queued tracking records into an MLflow store: how each record becomes MLflow calls, and why sending one twice
logs it once.

    writer = StoreWriter(uri)
    writer.write(cell, records)   # in order; an SQLite store's epoch metrics may stay buffered
    writer.commit()               # everything written so far is in the store when this returns

Idempotent: the run is found by its identity tag, params already set are not sent again, metrics whose step is already
logged under their check key are skipped, and tags and end states are set to the same values again. So a sender
killed anywhere, whose records are sent again, leaves each of them logged once.

An SQLite store gets its metrics in bulk: MLflow's own log_batch costs about 0.25 ms a metric in its ORM (measured
with MLflow 3.17, docs/tracking.md), 200 s for the 10^5 epochs of a large grid, so the rows go into MLflow's
metrics and latest_metrics tables with one INSERT per table and one transaction per commit (BULK_ROWS at most), as MLflow writes them
(NaN as 0 with is_nan, +-inf as +-max float, the latest value by (step, timestamp, value)). The tables' columns are
checked first; a schema without them goes through MLflow's API. Everything else (runs, params, tags, status) always
goes through MLflow's API.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from ops.atomic import write_bytes

from orchestrator.common import paths
from orchestrator.common.cellfiles import RUN_CACHE
from orchestrator.tracking import dashboard, launches
from orchestrator.tracking.launches import TAG_NOTE  # noqa: F401 - re-exported

if TYPE_CHECKING:
    import sqlite3

log = logging.getLogger(__name__)

TAG_CELL = "amdnn.cell"          # the cell identity: how a resumed cell finds its run
EXPERIMENT_DESCRIPTION = (
    "AMDNN grid: each run is one cell, a network trained with every multiply (forward and backward) through one "
    "simulated multiplier, nested under the run of the launch that trained it (its + opens it). Views > AMDNN shows "
    "the accuracy, model, mult, dataset, seed and epochs. Filter by the tags amdnn.model, amdnn.mult, amdnn.dataset, "
    "amdnn.seed, amdnn.device, amdnn.job_id, amdnn.host, amdnn.ops_build, amdnn.launch, e.g. "
    "tags.`amdnn.mult` = 'am16'. final_test_accuracy is the result; "
    "a run that failed (collapsed, diverged, crashed too often) says why in its amdnn.error tag.")
# An experiment's tags: its description (the dashboard shows it above the runs) and the saved view of the columns a
# researcher reads first (tracking.dashboard). Set when the experiment is made, or on first use if it lacks them.
EXPERIMENT_TAGS = {TAG_NOTE: lambda: EXPERIMENT_DESCRIPTION, dashboard.VIEW_TAG: dashboard.view_tag_value}
EPOCH_KEY = "epoch"              # logged with every epoch's metrics; its steps say which epochs are already in
# The columns the bulk path reads or writes, per table: a store whose tables lack one goes through the API.
BULK_COLUMNS = {"metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
                "latest_metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
                "runs": {"run_uuid", "experiment_id", "lifecycle_stage", "start_time"},
                "tags": {"key", "value", "run_uuid"}, "experiments": {"experiment_id", "name"}}
BULK_ROWS = 200_000              # metric rows buffered before a commit: ~40 MB of tuples, 2-5 s of SQLite


@dataclass(frozen=True)
class Cell:
    """What a writer needs to know of a cell to find or create its run."""
    identity: str
    experiment: str
    cell_dir: Path
    run_name: str | None = None


def read_run_cache(cell_dir: Path) -> dict:
    try:
        return json.loads((Path(cell_dir) / RUN_CACHE).read_text())
    except (OSError, ValueError):
        return {}


def create_sqlite_store(db: Path) -> None:
    """Create the SQLite store `db` once, safely, and leave a DB.ready marker beside it.

    MLflow creates a store by running its schema migrations, which are not one transaction: two processes doing it
    at once collide, and a process killed half-way leaves a store no later process can open. So the first process
    builds the schema in a temporary file under a lock and renames it into place; the others wait for the marker.
    """
    # filelock imports sqlite3, and a job of single-writer mode must not load what opens the store: both only here,
    # where a store is made (MLflow takes seconds to import)
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


def has_columns(conn: sqlite3.Connection, tables: Mapping[str, set[str]]) -> bool:
    """Whether the store behind `conn` has every column of `tables` ({table: columns}): what the bulk paths (this
    writer, tracking.reads' queries) read or write as MLflow does; a store without them goes through MLflow's API."""
    have = {table: {row[1] for row in conn.execute(f"PRAGMA table_info({table})")} for table in tables}
    return all(columns <= have[table] for table, columns in tables.items())


def sanitized(value: float) -> tuple[float, int]:
    """A metric value as MLflow's SQL store keeps it: (value, is_nan)."""
    if math.isnan(value):
        return 0.0, 1
    if math.isinf(value):
        return (1.7976931348623157e308 if value > 0 else -1.7976931348623157e308), 0
    return value, 0


class StoreWriter:
    """Writes the records of any number of cells into one store (see the module docstring)."""

    def __init__(self, uri: str):
        self.uri = uri
        self.db = paths.sqlite_path(uri)
        self._client = None
        self._sql: sqlite3.Connection | None = None
        self._bulk: bool | None = None                    # decided on first use (the schema check)
        self._runs: dict[str, str] = {}                   # identity -> run id, this writer's lifetime
        self._indexed: set[str] = set()                   # experiments whose runs were read in one query
        self._logged: dict[tuple[str, str], set[int]] = {}  # (run id, check key) -> steps in the store or buffered
        self._created: set[str] = set()                   # runs created with their start record's tags, RUNNING
        self._rows: list[tuple] = []                      # buffered metrics rows
        self._latest: dict[tuple[str, str], tuple] = {}   # (run id, key) -> the newest buffered row
        self._parents: dict[tuple[str, str], str] = {}    # (experiment, launch id) -> the launch's run id
        self._unsettled: set[str] = set()                 # launch runs whose cells started or ended here

    # -- connections --------------------------------------------------------------------------------------------
    def client(self):
        if self._client is None:
            from mlflow.tracking import MlflowClient  # as in create_sqlite_store

            if self.db is not None and not self.db.with_name(self.db.name + ".ready").exists():
                create_sqlite_store(self.db)
            client = MlflowClient(self.uri)
            client.search_experiments(max_results=1)
            self._client = client
        return self._client

    def _bulk_sql(self) -> sqlite3.Connection | None:
        """The SQLite connection of the bulk path, or None where it does not apply."""
        if self._bulk is None:
            self._bulk = False
            if self.db is not None:
                import sqlite3  # here: a job that only queues never loads it

                if not self.db.with_name(self.db.name + ".ready").exists():
                    self.client()  # creates the store; a store that exists needs no MLflow (2-5 s to import) for this
                conn = sqlite3.connect(str(self.db), timeout=30, isolation_level=None)
                if has_columns(conn, BULK_COLUMNS):
                    self._sql, self._bulk = conn, True
                else:
                    conn.close()
                    log.warning("MLflow store %s has tables this version does not know: metrics go through MLflow's "
                                "API (slower)", self.db)
        return self._sql

    def close(self) -> None:
        """Settle the launches written to (settle_launches), then close the store's connection."""
        if self._unsettled:
            self.settle_launches()
        if self._sql is not None:
            self._sql.close()
            self._sql, self._bulk = None, None

    # -- runs ---------------------------------------------------------------------------------------------------
    def _experiment_id(self, name: str) -> str:
        client = self.client()
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            for key, value in EXPERIMENT_TAGS.items():
                if key not in exp.tags:
                    client.set_experiment_tag(exp.experiment_id, key, value())
            return exp.experiment_id
        try:
            return client.create_experiment(name, artifact_location=paths.artifact_location(self.uri),
                                            tags={key: value() for key, value in EXPERIMENT_TAGS.items()})
        except Exception:  # another process created it a moment ago
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def _index(self, experiment: str) -> None:
        """Every run of `experiment` by identity tag, in one query (oldest first, as find_run)."""
        sql = self._bulk_sql()
        self._indexed.add(experiment)
        if sql is None:
            return
        rows = sql.execute(
            "SELECT t.value, r.run_uuid FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
            "JOIN experiments e ON e.experiment_id = r.experiment_id "
            "WHERE t.key = ? AND e.name = ? AND r.lifecycle_stage = 'active' ORDER BY r.start_time DESC",
            (TAG_CELL, experiment)).fetchall()
        self._runs.update(dict(rows))  # the oldest run of an identity is written last and wins

    def find_run_id(self, cell: Cell) -> str | None:
        """The cell's run (by identity tag), or None."""
        if cell.identity in self._runs:
            return self._runs[cell.identity]
        if self._bulk_sql() is not None:
            if cell.experiment not in self._indexed:
                self._index(cell.experiment)
            return self._runs.get(cell.identity)
        client = self.client()
        cached = read_run_cache(cell.cell_dir).get(self.uri)
        if cached:
            try:
                if client.get_run(cached).data.tags.get(TAG_CELL) == cell.identity:
                    return cached
            except Exception:  # noqa: BLE001 - cached id from another store: search by tag below
                pass
        exp = client.get_experiment_by_name(cell.experiment)
        if exp is None:
            return None
        runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{TAG_CELL}` = '{cell.identity}'",
                                  order_by=["attributes.start_time ASC"], max_results=1)
        return runs[0].info.run_id if runs else None

    def run_id(self, cell: Cell, tags: Mapping[str, str] | None = None, start_ms: int | None = None) -> str:
        """The cell's run, created (with `tags`, started at `start_ms`: when the cell queued its start, not when the
        store first answered) if it has none; remembered in the cell folder (RUN_CACHE)."""
        run_id = self.find_run_id(cell)
        if run_id is None:
            self.commit()  # MLflow's own transaction next: nothing of ours may be open
            run = self.client().create_run(self._experiment_id(cell.experiment),
                                           tags={TAG_CELL: cell.identity, **(tags or {})}, run_name=cell.run_name,
                                           start_time=start_ms)
            run_id = run.info.run_id
            self._created.add(run_id)
        self._runs[cell.identity] = run_id
        cache = read_run_cache(cell.cell_dir)
        if cache.get(self.uri) != run_id:
            cache[self.uri] = run_id
            write_bytes(Path(cell.cell_dir) / RUN_CACHE, json.dumps(cache, indent=1).encode())
        return run_id

    # -- records ------------------------------------------------------------------------------------------------
    def write(self, cell: Cell, records: Iterable[Mapping[str, Any]]) -> None:
        """Write `records` of `cell` in order; raises on the first failure (what was written stays written)."""
        records = list(records)
        if not records:
            return
        start = next((r for r in records if r["op"] == "start"), None)
        if start is not None and start.get("launch"):  # nested under its launch's run (tracking.launches)
            start = {**start, "tags": {**start["tags"], **self._launch_tags(cell, start)}}
            records = [start if r["op"] == "start" else r for r in records]
        run_id = self.run_id(cell, start["tags"] if start else None, start.get("time_ms") if start else None)
        for record in records:
            op = record["op"]
            if op == "metrics":
                self._metrics(run_id, record)
                continue
            self.commit()  # an API call next: the buffered metrics go first, in order
            self._api(run_id, record)
            parent = (record["tags"].get(launches.TAG_PARENT) if op == "start" else
                      self._launch_parent(run_id) if op == "end" else None)
            if parent:  # the launch's run: RUNNING or ended, as its cells are, once this writer is done
                self._unsettled.add(parent)

    def _launch_tags(self, cell: Cell, start: Mapping[str, Any]) -> dict[str, str]:
        launch = start["launch"]
        key = (cell.experiment, str(launch["id"]))
        if key not in self._parents:
            self.commit()  # MLflow's own transactions next
            experiment_id = self._experiment_id(cell.experiment)
            with contextlib.ExitStack() as held:
                if self.db is not None:  # the cells of a local sweep start together: one makes the launch's run
                    from filelock import FileLock  # as in create_sqlite_store

                    held.enter_context(FileLock(str(self.db) + ".launches.lock", timeout=300))
                self._parents[key] = launches.parent_run_id(self.client(), experiment_id, launch,
                                                            start.get("time_ms"))
        return {launches.TAG_PARENT: self._parents[key], launches.TAG_LAUNCH: key[1]}

    def settle_launches(self) -> None:
        """Set the status of the launch runs whose cells this writer started or ended (launches.settle): once per
        launch and writer, each read in two queries on an SQLite store, so an import of a launch's N cells costs
        O(N), not N searches of N runs. A failure leaves a status for the next writer to set."""
        sql = self._bulk_sql()
        for parent in sorted(self._unsettled):
            try:
                known = None
                if sql is not None:
                    row = sql.execute("SELECT r.status, t.value FROM runs r LEFT JOIN tags t ON t.run_uuid = r.run_uuid "
                                      "AND t.key = ? WHERE r.run_uuid = ?", (launches.TAG_CELLS, parent)).fetchone()
                    children = sql.execute(
                        "SELECT r.status, r.end_time FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                        "WHERE t.key = ? AND t.value = ? AND r.lifecycle_stage = 'active'",
                        (launches.TAG_PARENT, parent)).fetchall()
                    known = (row[0], int(row[1] or 0)) if row else None
                launches.settle(self.client(), parent, known, children if known else None)
            except Exception as e:  # noqa: BLE001 - a derived status: the next writer sets it
                log.warning("could not set the status of launch run %s: %s", parent, e)
        self._unsettled.clear()

    def _launch_parent(self, run_id: str) -> str | None:
        """The run's parent, if a launch nested it (from the store's tables where it is SQLite: no API call for
        the runs of no launch)."""
        sql = self._bulk_sql()
        if sql is not None:
            tags = dict(sql.execute("SELECT key, value FROM tags WHERE run_uuid = ? AND key IN (?, ?)",
                                    (run_id, launches.TAG_PARENT, launches.TAG_LAUNCH)).fetchall())
        else:
            tags = self.client().get_run(run_id).data.tags
        return tags.get(launches.TAG_PARENT) if launches.TAG_LAUNCH in tags else None

    def _steps(self, run_id: str, check: str) -> set[int]:
        key = (run_id, check)
        if key not in self._logged:
            sql = self._bulk_sql()
            if sql is not None:
                rows = sql.execute("SELECT DISTINCT step FROM metrics WHERE run_uuid = ? AND key = ?", key)
                self._logged[key] = {step for (step,) in rows}
            else:
                self._logged[key] = {m.step for m in self.client().get_metric_history(run_id, check)}
        return self._logged[key]

    def _metrics(self, run_id: str, record: Mapping[str, Any]) -> None:
        steps = self._steps(run_id, record.get("check", EPOCH_KEY))
        step, time_ms = int(record["step"]), int(record["time_ms"])
        if step in steps:
            return
        if self._bulk_sql() is None:
            from mlflow.entities import Metric  # only off the bulk SQL path, which needs no MLflow

            # One log_batch: all of the record's metrics in one transaction of MLflow's store.
            self.client().log_batch(run_id, metrics=[Metric(k, v, time_ms, step) for k, v in record["metrics"].items()])
        else:
            for key, raw in record["metrics"].items():
                value, is_nan = sanitized(float(raw))
                row = (key, value, time_ms, run_id, step, is_nan)
                self._rows.append(row)
                newest = self._latest.get((run_id, key))
                if newest is None or (step, time_ms, value) > (newest[4], newest[2], newest[1]):
                    self._latest[(run_id, key)] = row
        steps.add(step)
        if len(self._rows) >= BULK_ROWS:
            self.commit()

    def commit(self) -> None:
        """Put the buffered metrics into the store: one transaction, all or nothing."""
        if not self._rows:
            return
        sql = self._bulk_sql()
        assert sql is not None
        sql.execute("BEGIN IMMEDIATE")
        try:
            sql.executemany("INSERT OR IGNORE INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
                            "VALUES (?, ?, ?, ?, ?, ?)", self._rows)
            sql.executemany(
                "INSERT INTO latest_metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (key, run_uuid) DO UPDATE SET value = excluded.value, timestamp = excluded.timestamp, "
                "step = excluded.step, is_nan = excluded.is_nan WHERE (excluded.step, excluded.timestamp, "
                "excluded.value) > (latest_metrics.step, latest_metrics.timestamp, latest_metrics.value)",
                list(self._latest.values()))
            sql.execute("COMMIT")
        except BaseException:
            sql.execute("ROLLBACK")
            for run_id, check in list(self._logged):  # what was buffered is not in: read the steps again
                self._logged.pop((run_id, check))
            raise
        finally:
            self._rows, self._latest = [], {}

    def _api(self, run_id: str, record: Mapping[str, Any]) -> None:
        from mlflow.entities import Dataset, DatasetInput, InputTag, Param, RunTag  # as in create_sqlite_store

        client, op = self.client(), record["op"]
        if op == "start":
            created = run_id in self._created  # just now, with these tags and status RUNNING: 3 calls fewer
            self._created.discard(run_id)
            have = {} if created else client.get_run(run_id).data.params
            # A param already set keeps its first value (MLflow refuses changes; paths may differ on resume).
            params = [Param(k, v[:6000]) for k, v in record["params"].items() if k not in have]
            for j in range(0, len(params), 100):
                client.log_batch(run_id, params=params[j:j + 100])
            if not created:
                client.log_batch(run_id, tags=[RunTag(k, v) for k, v in record["tags"].items()])
                client.update_run(run_id, status="RUNNING")
        elif op == "tags":
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in record["tags"].items()])
        elif op == "dataset":  # idempotent: the store keeps one input per (run, name, digest)
            client.log_inputs(run_id, datasets=[DatasetInput(Dataset(**record["dataset"]),
                                                             tags=[InputTag("mlflow.data.context", "train")])])
        elif op == "artifacts":  # sending them again replaces the same files
            if Path(record["dir"]).is_dir():
                client.log_artifacts(run_id, record["dir"], artifact_path=record["path"])
            else:
                log.warning("tracking queue: artifacts folder %s is gone; not logged", record["dir"])
        elif op == "end":
            client.set_terminated(run_id, status=record["status"], end_time=record["time_ms"])
        else:
            log.warning("tracking queue: unknown record %r skipped", op)
