"""The metric histories of many runs read at once: what the report's learning curves need from the store.

    read_histories(uri, run_ids, keys)   {run id: {key: [(step, value), ...]}}, each list in the order MLflow's
                                         get_metric_history returns it (by timestamp, step, value), NaN as NaN

MLflow's API reads one metric of one run per call, 20-25 ms each through its ORM: the 3 curve keys of a 1000-cell
grid took ~70 s of the report's 74.5 s (docs/tracking.md). An SQLite store is read instead with one query on a
read-only connection (0.6 s for the 609,000 rows of 1000 runs x 203 epochs x 3 keys): SQLite's shared lock is all
it takes, as MLflow's own readers do, and its busy timeout waits out an importer's commit. The table's columns
are checked first (tracking_writer.has_columns, the same check the bulk writer makes); a store without them, and a
tracking server, go through MLflow's API, run by run.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from . import paths
from .tracking_writer import BULK_COLUMNS, has_columns

History = dict[str, list[tuple[int, float]]]   # key -> [(step, value), ...]
NAN = float("nan")   # MLflow keeps a NaN as value 0 with is_nan set, and returns it as NaN
BUSY_TIMEOUT_S = 60  # an importer's commit of 200,000 metric rows (BULK_ROWS) takes 2-5 s; a busy disk, more


def read_histories(uri: str, run_ids: Sequence[str], keys: Sequence[str]) -> dict[str, History]:
    """Every logged value of `keys` for each run of `run_ids` (runs or keys without values are left out)."""
    run_ids = list(dict.fromkeys(run_ids))
    if not run_ids:
        return {}
    db = paths.sqlite_path(uri)
    if db is not None and db.exists():
        found = _sqlite_histories(db, run_ids, keys)
        if found is not None:
            return found
    return api_histories(uri, run_ids, keys)


def api_histories(uri: str, run_ids: Sequence[str], keys: Sequence[str]) -> dict[str, History]:
    """read_histories through MLflow's API: one get_metric_history call per run and key (any store)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    out: dict[str, History] = {}
    for run_id in dict.fromkeys(run_ids):
        history = {key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)] for key in keys}
        history = {key: values for key, values in history.items() if values}
        if history:
            out[run_id] = history
    return out


def _sqlite_histories(db, run_ids: list[str], keys: Sequence[str]) -> dict[str, History] | None:
    """read_histories from the SQLite file `db`, or None where its metrics table is not the one MLflow writes."""
    import sqlite3

    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S,
                           isolation_level=None)
    try:
        if not has_columns(conn, {"metrics": BULK_COLUMNS["metrics"]}):
            return None
        conn.execute("BEGIN")  # one snapshot
        # The wanted runs in a temporary table (the connection's own, in memory: the store is not written). It costs
        # 0.1 s of the 0.6 s query over 1000 runs, and keeps other experiments' rows out of Python.
        conn.execute("CREATE TEMP TABLE wanted (run_uuid TEXT PRIMARY KEY)")
        conn.executemany("INSERT OR IGNORE INTO temp.wanted VALUES (?)", [(run_id,) for run_id in run_ids])
        # The primary key's order (key, timestamp, step, run_uuid, value): no sort, and within one run and key it is
        # MLflow's get_metric_history order (timestamp, step, value), which the lists keep.
        rows = conn.execute(
            f"SELECT run_uuid, key, step, value, is_nan FROM metrics WHERE key IN ({','.join('?' * len(keys))}) "
            "AND run_uuid IN temp.wanted ORDER BY key, timestamp, step, run_uuid, value", list(keys)).fetchall()
        conn.execute("COMMIT")
    finally:
        conn.close()
    lists: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    for run_id, key, step, value, is_nan in rows:
        lists[(run_id, key)].append((step, NAN if is_nan else value))
    out: dict[str, History] = defaultdict(dict)
    for (run_id, key), values in lists.items():
        out[run_id][key] = values
    return dict(out)
