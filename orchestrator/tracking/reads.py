"""Reading many runs of an MLflow store at once: what the report and `status` read of a grid.

    cell_runs(uri, experiment)           [CellRun(run_id, status, tags, params, metrics)]: the experiment's active runs
                                         with a cell identity tag, newest first, as MLflow's search_runs gives them
    read_histories(uri, run_ids, keys)   {run id: {key: [(step, value), ...]}}, each list in the order MLflow's
                                         get_metric_history returns it (by timestamp, step, value), NaN as NaN

Through MLflow's API both are slow at a grid's size. search_runs builds an ORM object per run, tag, param and metric
(~50,000 for 1000 cells: 1.3-3.5 s), after 1.7 s of importing MLflow and its SQL store; get_metric_history reads
one metric of one run per call, 20-25 ms each: the 3 curve keys of a 1000-cell grid took ~70 s of the report's 74.5 s
(docs/tracking.md). So an SQLite store is read with a few plain queries on a read-only connection in one snapshot:
SQLite's shared lock is all it takes, as MLflow's own readers do, and its busy timeout waits out an importer's
commit. The tables' columns are checked first (tracking.writer.has_columns, the check the bulk writer makes). A store
without them, one that a killed writer left a journal in (a read-only connection cannot roll it back; MLflow's does),
and a tracking server are read through MLflow's API (api_cell_runs, api_histories), which the tests compare with the
queries on a real store.
"""
from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Sequence, TypeVar

from orchestrator.common import paths
from orchestrator.tracking.writer import TAG_CELL, has_columns

log = logging.getLogger(__name__)
T = TypeVar("T")
History = dict[str, list[tuple[int, float]]]   # key -> [(step, value), ...]
NAN = float("nan")     # MLflow keeps a NaN as value 0 with is_nan set, and returns it as NaN
MAX_RUNS = 50_000      # runs read per experiment, as the search_runs calls they replace asked for
BUSY_TIMEOUT_S = 60    # an importer's commit of 200,000 metric rows (tracking.writer.BULK_ROWS) takes 2-5 s
# The columns these queries read, per table: a store whose tables lack one is read through MLflow's API.
READ_COLUMNS = {"experiments": {"experiment_id", "name"},
                "runs": {"run_uuid", "experiment_id", "lifecycle_stage", "start_time", "status"},
                "tags": {"key", "value", "run_uuid"}, "params": {"key", "value", "run_uuid"},
                "latest_metrics": {"key", "value", "run_uuid", "is_nan"},
                "metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"}}


@dataclass
class CellRun:
    """What the report and status read of a cell's run: MLflow's run.info and run.data, flattened."""
    run_id: str
    status: str                                          # FINISHED, RUNNING, FAILED, KILLED, SCHEDULED
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)  # the latest value of each key


# -- SQLite ---------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _snapshot(uri: str) -> Iterator[sqlite3.Connection | None]:
    """A read-only connection to the SQLite store of `uri` in one read transaction, or None where the store is not an
    SQLite file that exists with MLflow's columns."""
    db = paths.sqlite_path(uri)
    if db is None or not db.exists():
        yield None
        return
    conn = sqlite3.connect(f"{Path(db).resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                           isolation_level=None)
    try:
        if not has_columns(conn, READ_COLUMNS):
            yield None
            return
        conn.execute("BEGIN")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


def _wanted(conn: sqlite3.Connection, run_ids: Sequence[str]) -> None:
    """The runs to read, in a temporary table (the connection's own, in memory: the store is not written). Costs
    0.1 s of the 0.6 s histories query over 1000 runs, and keeps other experiments' rows out of Python."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (run_uuid TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.wanted")
    conn.executemany("INSERT OR IGNORE INTO temp.wanted VALUES (?)", [(run_id,) for run_id in run_ids])


def _sqlite_cell_runs(conn: sqlite3.Connection, experiment: str) -> list[CellRun]:
    # search_runs(filter "tags.`amdnn.cell` != ''") of the active runs, in its order: start_time DESC, run_uuid
    found = conn.execute(
        "SELECT r.run_uuid, r.status FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id "
        "JOIN tags t ON t.run_uuid = r.run_uuid AND t.key = ? "
        "WHERE e.name = ? AND r.lifecycle_stage = 'active' AND t.value != '' "
        "ORDER BY r.start_time DESC, r.run_uuid LIMIT ?", (TAG_CELL, experiment, MAX_RUNS)).fetchall()
    runs = {run_id: CellRun(run_id, status) for run_id, status in found}
    _wanted(conn, list(runs))
    for table, attribute in (("tags", "tags"), ("params", "params")):
        for run_id, key, value in conn.execute(f"SELECT run_uuid, key, value FROM {table} WHERE run_uuid IN temp.wanted"):
            getattr(runs[run_id], attribute)[key] = value
    for run_id, key, value, is_nan in conn.execute(
            "SELECT run_uuid, key, value, is_nan FROM latest_metrics WHERE run_uuid IN temp.wanted"):
        runs[run_id].metrics[key] = NAN if is_nan else value
    return list(runs.values())


def _sqlite_histories(conn: sqlite3.Connection, run_ids: Sequence[str], keys: Sequence[str]) -> dict[str, History]:
    _wanted(conn, run_ids)
    # The primary key's order (key, timestamp, step, run_uuid, value): no sort, and within one run and key it is
    # MLflow's get_metric_history order (timestamp, step, value), which the lists keep. 0.6 s for the 609,000 rows
    # of 1000 runs x 203 epochs x 3 keys.
    rows = conn.execute(
        f"SELECT run_uuid, key, step, value, is_nan FROM metrics WHERE key IN ({','.join('?' * len(keys))}) "
        "AND run_uuid IN temp.wanted ORDER BY key, timestamp, step, run_uuid, value", list(keys)).fetchall()
    lists: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for run_id, key, step, value, is_nan in rows:
        lists[(run_id, key)].append((step, NAN if is_nan else value))
    out: dict[str, History] = defaultdict(dict)
    for (run_id, key), values in lists.items():
        out[run_id][key] = values
    return dict(out)


# -- the readers ----------------------------------------------------------------------------------------------------
def _read(uri: str, from_sql: Callable[[sqlite3.Connection], T], from_api: Callable[[], T]) -> T:
    try:
        with _snapshot(uri) as conn:
            if conn is not None:
                return from_sql(conn)
    except sqlite3.OperationalError as error:
        # A writer killed mid-commit leaves a hot journal that only a read-write connection may roll back ("attempt
        # to write a readonly database" here): MLflow's connection does, so the read goes through it.
        log.info("store %s not readable read-only (%s): reading through MLflow's API", uri, error)
    return from_api()


def cell_runs(uri: str, experiment: str) -> list[CellRun]:
    """The active runs of `experiment` with a cell identity tag, newest first (MLflow's order)."""
    return _read(uri, lambda conn: _sqlite_cell_runs(conn, experiment), lambda: api_cell_runs(uri, experiment))


def read_histories(uri: str, run_ids: Sequence[str], keys: Sequence[str]) -> dict[str, History]:
    """Every logged value of `keys` for each run of `run_ids` (runs or keys without values are left out)."""
    run_ids = list(dict.fromkeys(run_ids))
    if not run_ids:
        return {}
    return _read(uri, lambda conn: _sqlite_histories(conn, run_ids, keys), lambda: api_histories(uri, run_ids, keys))


# -- MLflow's API (any store) ---------------------------------------------------------------------------------------
def api_cell_runs(uri: str, experiment: str) -> list[CellRun]:
    """cell_runs through MLflow's search_runs."""
    from mlflow.tracking import MlflowClient  # MLflow (seconds to import) only off SQLite: those reads need none

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{TAG_CELL}` != ''", max_results=MAX_RUNS)
    return [CellRun(run.info.run_id, run.info.status, dict(run.data.tags), dict(run.data.params),
                    dict(run.data.metrics)) for run in runs]


def api_histories(uri: str, run_ids: Sequence[str], keys: Sequence[str]) -> dict[str, History]:
    """read_histories through MLflow's API: one get_metric_history call per run and key."""
    from mlflow.tracking import MlflowClient  # as in api_cell_runs

    client = MlflowClient(uri)
    out: dict[str, History] = {}
    for run_id in dict.fromkeys(run_ids):
        history = {key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)] for key in keys}
        history = {key: values for key, values in history.items() if values}
        if history:
            out[run_id] = history
    return out
