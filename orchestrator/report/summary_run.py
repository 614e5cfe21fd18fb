"""The summary run of an experiment: one MLflow run, named "report", that carries the latest report as artifacts, so
the dashboard shows the table, its heatmaps and curves.

It lives in an experiment of its own, `<experiment>-report` (report_experiment), not among the cells: MLflow's UI
counts, charts and compares every run of the experiment it shows, and a filter that leaves one run out must be typed
by each user in each browser, so the cells' experiment holds cells and their launches only. It is found by its tag
(TAG_SUMMARY); a summary run an older version left in the cells' experiment is deleted (MLflow's soft delete) when
the report is next published. Each publication replaces the files of the same names under report/ and logs how many
cells had finished (cells_finished, cells_total) at an increasing step.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from orchestrator.common import paths
from orchestrator.report.table import Row

TAG_SUMMARY = "amdnn.summary"
SUMMARY_VALUE = "report"
RUN_NAME = "report"
ARTIFACT_DIR = "report"
DESCRIPTION = ("The experiment's results table (report/report.html, .md, .csv), its heatmaps and learning curves, "
               "written by `python -m orchestrator.report`, at the end of a local sweep and by the resume cron when "
               "a grid's last cell finishes.")


def report_experiment(experiment: str) -> str:
    """The name of the experiment that holds `experiment`'s summary run."""
    return f"{experiment}-report"


def find_summary_run(client, experiment_id: str):
    runs = client.search_runs([experiment_id], filter_string=f"tags.`{TAG_SUMMARY}` = '{SUMMARY_VALUE}'",
                              order_by=["attributes.start_time ASC"], max_results=1)
    return runs[0] if runs else None


def _experiment_id(client, experiment: str, uri: str) -> str:
    exp = client.get_experiment_by_name(experiment)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(experiment, artifact_location=paths.artifact_location(uri))
    except Exception:  # created by a cell a moment ago
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            raise
        return exp.experiment_id


def publish(uri: str, experiment: str, report_dir: str | Path, rows: Sequence[Row]) -> str:
    """Log every file of report_dir under report/ of the experiment's summary run (made on first use); its id."""
    from mlflow.tracking import MlflowClient  # MLflow (seconds to import) only when the report is published

    client = MlflowClient(uri)
    cells = client.get_experiment_by_name(experiment)
    old = cells and find_summary_run(client, cells.experiment_id)
    if old:  # an older version's, among the cells
        client.delete_run(old.info.run_id)
    experiment_id = _experiment_id(client, report_experiment(experiment), uri)
    run = find_summary_run(client, experiment_id)
    if run is None:
        run = client.create_run(experiment_id, run_name=RUN_NAME,
                                tags={TAG_SUMMARY: SUMMARY_VALUE, "mlflow.note.content": DESCRIPTION})
    run_id = run.info.run_id
    client.log_artifacts(run_id, str(report_dir), artifact_path=ARTIFACT_DIR)
    step = len(client.get_metric_history(run_id, "cells_total"))
    finished = sum(r.status == "FINISHED" and r.test_accuracy is not None for r in rows)
    now = int(time.time() * 1000)
    client.log_metric(run_id, "cells_finished", finished, timestamp=now, step=step)
    client.log_metric(run_id, "cells_total", len(rows), timestamp=now, step=step)
    client.set_terminated(run_id, status="FINISHED")
    return run_id
