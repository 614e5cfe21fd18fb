"""A launch in MLflow: one parent run per sweep, with the runs of its cells nested under it.

The sweep's callback (orchestrator.sweep.callbacks) describes the launch before any cell runs and hands it to every
cell through the environment (VARIABLE); config.cell puts it into the cell's resolved config, which a cluster job
carries in its pickle. A cell's start record carries it into its queue, and whoever writes the records into the store
(the cell itself in direct mode, an importer in queue and single-writer modes: orchestrator.tracking.writer) finds
or creates the launch's run and nests the cell's run under it with MLflow's own tag, mlflow.parentRunId. So a cell
that never opens the store still lands under its launch.

    launch = describe(experiment, cells, argv)   # {"id", "name", "cells", "command"}

The launch's id hashes the experiment and its cells' identities: the same command run again (to resume what did not
finish) continues the same parent run. A cell's run is nested under the launch that last started training it. The
parent run is RUNNING while any of its cells runs, and ends (FINISHED, or FAILED or KILLED when a cell did) once as
many of its cells as the launch had left to train have ended (settle).
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
from typing import Iterable, Mapping, Sequence

VARIABLE = "AMDNN_LAUNCH"        # the launch (JSON) the cells of a sweep read when their config is resolved
TAG_LAUNCH = "amdnn.launch"      # on the cells' runs and on the parent: the launch's id
TAG_LAUNCH_RUN = "amdnn.launch_run"  # on the parent only: how the writer finds it
TAG_CELLS = "amdnn.launch_cells"     # on the parent: how many cells the launch had left to train
TAG_COMMAND = "amdnn.command"
TAG_PARENT = "mlflow.parentRunId"  # MLflow's own: its UI nests a run under this one
TAG_NOTE = "mlflow.note.content"
ENDED = ("FINISHED", "FAILED", "KILLED")


def describe(experiment: str, cells: Sequence[Mapping], argv: Sequence[str], left: int | None = None) -> dict:
    """The launch of `cells` (dicts with identity, model, mult, dataset): its id, a name that says what it trains,
    how many cells it has `left` to train (default: all) and its command line."""
    identities = sorted(str(c["identity"]) for c in cells)
    digest = hashlib.sha256(json.dumps([experiment, identities]).encode()).hexdigest()[:12]

    def listed(key: str) -> str:
        values = list(dict.fromkeys(str(c[key]) for c in cells))
        return ",".join(values) if len(values) <= 4 else f"{len(values)} {key}s"

    name = (f"launch {listed('model')} x {listed('mult')} ({listed('dataset')}), {len(cells)} cell"
            f"{'' if len(cells) == 1 else 's'}")
    return {"id": digest, "name": name[:250], "cells": len(cells) if left is None else left,
            "command": shlex.join(argv)[:5000]}


def to_environment(launch: Mapping) -> None:
    os.environ[VARIABLE] = json.dumps(dict(launch))


def from_environment() -> dict | None:
    """The launch the sweep handed to its cells, or None (a single run, a test calling run_cell)."""
    text = os.environ.get(VARIABLE)
    if not text:
        return None
    try:
        launch = json.loads(text)
    except ValueError:
        return None
    return launch if isinstance(launch, dict) and launch.get("id") else None


def find_parent(client, experiment_id: str, launch_id: str):
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{TAG_LAUNCH_RUN}` = '{launch_id}'",
                              order_by=["attributes.start_time ASC"], max_results=1)
    return runs[0] if runs else None


def parent_run_id(client, experiment_id: str, launch: Mapping, start_ms: int | None) -> str:
    """The launch's parent run in the experiment, created RUNNING on first use."""
    run = find_parent(client, experiment_id, launch["id"])
    if run is not None:
        return run.info.run_id
    note = (f"One launch of {launch['cells']} cell(s); its cells' runs are nested under this run.\n\n"
            f"    {launch.get('command', '')}")
    run = client.create_run(experiment_id, run_name=launch["name"], start_time=start_ms, tags={
        TAG_LAUNCH: launch["id"], TAG_LAUNCH_RUN: launch["id"], TAG_CELLS: str(launch["cells"]),
        TAG_COMMAND: launch.get("command", ""), TAG_NOTE: note})
    return run.info.run_id


def status_of(statuses: Iterable[str], expected: int) -> str:
    """The parent's status from its children's: RUNNING until `expected` of them have ended."""
    statuses = list(statuses)
    if len(statuses) < expected or any(s not in ENDED for s in statuses):
        return "RUNNING"
    if all(s == "FINISHED" for s in statuses):
        return "FINISHED"
    return "FAILED" if "FAILED" in statuses else "KILLED"


def settle(client, parent_id: str, parent: tuple[str, int] | None = None,
           children: Sequence[tuple[str, int | None]] | None = None) -> str:
    """Set the parent run's status (and end time) from its children's, where it changed; the status. `parent`
    (status, expected cells) and `children` ([(status, end time)]) as the caller read them (the writer: with SQL),
    else through MLflow's API."""
    if parent is None or children is None:
        run = client.get_run(parent_id)
        parent = (run.info.status, int(run.data.tags.get(TAG_CELLS, "0") or 0))
        children = [(r.info.status, r.info.end_time) for r in client.search_runs(
            [run.info.experiment_id], filter_string=f"tags.`{TAG_PARENT}` = '{parent_id}'", max_results=50_000)]
    status = status_of((s for s, _ in children), parent[1])
    if status == "RUNNING":
        if parent[0] != "RUNNING":
            client.update_run(parent_id, status="RUNNING")
    elif parent[0] != status:
        client.set_terminated(parent_id, status=status, end_time=max((e or 0 for _, e in children), default=0) or None)
    return status
