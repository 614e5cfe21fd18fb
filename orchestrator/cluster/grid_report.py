"""The report of a grid once its last cell has finished: written by the resume cron (orchestrator.cluster.resume).

When every launched cell of the grid record is finished, the report of each experiment the grid logs to is written
into STATE_DIR/report/<experiment>/ and logged to that experiment's summary run in MLflow (report.files). Once per
set of finished cells: STATE_DIR/report/published.json holds the identities last reported, so a cron that runs every
ten minutes reports a grid once, and again only after a new launch adds cells that have finished in their turn.
"""
from __future__ import annotations

import sys
import typing as tp
from collections import defaultdict

from orchestrator.cluster.grid import Grid
from orchestrator.common.cellfiles import read_json, write_json
from orchestrator.report.files import publish_experiment

PUBLISHED = "published.json"


def report_if_complete(grid: Grid, records: tp.Sequence[dict], states: tp.Sequence[str],
                       out: tp.TextIO = sys.stdout) -> list[str]:
    """Publish the report of every experiment of the grid if each of its cells (`states`, in the order of
    `records`) is finished and this set of cells has not been reported yet; the experiments reported."""
    if not records or any(state != "finished" for state in states):
        return []
    folder = grid.root / "report"
    identities = sorted(record["identity"] for record in records)
    if (read_json(folder / PUBLISHED) or {}).get("identities") == identities:
        return []
    by_store: tp.Dict[tp.Tuple[str, str], tp.List[dict]] = defaultdict(list)
    for record in records:
        by_store[(record["tracking_uri"], record["experiment"])].append(record)
    reported = []
    for (uri, experiment), cells in sorted(by_store.items()):
        try:
            _, written, run_id = publish_experiment(uri, experiment, folder / experiment)
        except Exception as e:  # noqa: BLE001 - the store may be down: the next cron tries again
            print(f"[amdnn] every cell finished, but the report of {experiment} could not be written or logged "
                  f"({type(e).__name__}: {e}); the next run tries again", file=out)
            return reported
        print(f"every cell finished: the report of experiment {experiment} ({len(cells)} cells) is in "
              f"{folder / experiment} and in MLflow run {run_id} (\"report\")", file=out)
        reported.append(experiment)
    write_json(folder / PUBLISHED, {"identities": identities})
    return reported
