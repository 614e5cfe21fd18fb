"""A launch as MLflow's UI nests it, in a real SQLite store (the finished grid's, other experiments), without training: each cell's records go through the
Tracker as a cell sends them (direct mode) or only queues them for the importer (queue mode), and both land under one
parent run per launch, which ends when the launch's cells have ended. The finished grid's own launch, its report run
kept out of the cells' experiment, and the report's links to the cells' run pages are checked on the sweep's store."""
from __future__ import annotations

import json
import re
from pathlib import Path

from orchestrator.tracking import dashboard, launches
from orchestrator.tracking.importer import import_pending
from orchestrator.tracking.tracker import Tracker

CELLS = [{"identity": f"{i}" * 64, "model": "lenet300", "mult": mult, "dataset": "digits"}
         for i, mult in enumerate(("native", "am16"))]


def _cell(uri: str, root: Path, cell: dict, launch: dict, mode: str) -> Tracker:
    tracker = Tracker(uri, mode, cell["identity"], root / mode / cell["mult"], run_name=f"lenet300_{cell['mult']}",
                      mode=mode)
    tracker.start({"train.epochs": "2"}, {"amdnn.model": "lenet300", "amdnn.mult": cell["mult"]}, launch=launch)
    return tracker


def test_each_launch_is_a_parent_run_with_its_cells_nested(finished_grid, tmp_path):
    for mode in ("direct", "queue"):  # the sweep's store (making one is half the time), an experiment per mode
        _launch_in(finished_grid.uri, tmp_path, mode)


def _launch_in(uri: str, tmp_path: Path, mode: str) -> None:
    from mlflow.tracking import MlflowClient

    launch = launches.describe(mode, CELLS, ["launch.py", "-m", "mult=native,am16"])
    assert launch["name"] == "launch lenet300 x native,am16 (digits), 2 cells" and launch["cells"] == 2

    def send(tracker: Tracker) -> None:
        if mode == "direct":
            assert tracker.flush(force=True)
        else:  # the cell never opens the store: the importer, where the store is, sends its queue
            assert not tracker.sends and tracker.flush()
            import_pending(uri)

    first, second = (_cell(uri, tmp_path, cell, launch, mode) for cell in CELLS)
    for tracker in (first, second):
        send(tracker)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(mode)
    (parent,) = client.search_runs([exp.experiment_id], f"tags.`{launches.TAG_LAUNCH_RUN}` = '{launch['id']}'")
    assert parent.info.run_name == launch["name"] and parent.info.status == "RUNNING"
    assert parent.data.tags[launches.TAG_COMMAND] == "launch.py -m mult=native,am16"
    cells = client.search_runs([exp.experiment_id], "tags.`amdnn.cell` != ''")
    assert sorted(r.data.tags["amdnn.mult"] for r in cells) == ["am16", "native"]
    for run in cells:  # MLflow's own nesting tag, and the launch to filter by
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.data.tags[launches.TAG_LAUNCH] == launch["id"]
    # The experiment offers the project's columns as a saved view, in MLflow 3.17's envelope.
    view = json.loads(exp.tags[dashboard.VIEW_TAG])
    assert view["name"] == dashboard.VIEW_NAME and json.loads(view["state"])["selectedColumns"] == dashboard.COLUMNS

    first.log_metrics(2, {"final_test_accuracy": 0.9}, check="final_test_accuracy")
    first.end("FINISHED")
    send(first)
    assert client.get_run(parent.info.run_id).info.status == "RUNNING"  # one of its two cells still runs
    second.end("FAILED")
    send(second)
    ended = client.get_run(parent.info.run_id).info
    assert ended.status == "FAILED" and ended.end_time == client.get_run(second.run_id).info.end_time

    # The same command again (to finish what failed) continues the same parent run.
    again = _cell(uri, tmp_path, CELLS[1], launches.describe(mode, CELLS, ["launch.py"], left=1), mode)
    send(again)
    assert client.get_run(parent.info.run_id).info.status == "RUNNING"
    assert len(client.search_runs([exp.experiment_id], "")) == 3  # the parent and its two cells
    again.end("FINISHED")
    send(again)
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"


def test_the_sweeps_cells_are_nested_and_its_report_is_kept_apart(finished_grid):
    from orchestrator.report.summary_run import TAG_SUMMARY, report_experiment

    client = finished_grid.client()
    exp = client.get_experiment_by_name("amdnn")
    runs = client.search_runs([exp.experiment_id], "")
    cells = [r for r in runs if "amdnn.cell" in r.data.tags]
    (parent,) = [r for r in runs if "amdnn.cell" not in r.data.tags]  # the launch: nothing else beside the cells
    assert parent.data.tags[launches.TAG_LAUNCH_RUN] and parent.info.status == "FINISHED"
    assert parent.info.run_name == "launch lenet300 x native,am16 (digits), 2 cells"
    assert {r.data.tags["mlflow.parentRunId"] for r in cells} == {parent.info.run_id} and len(cells) == 2
    assert not client.search_runs([exp.experiment_id], f"tags.`{TAG_SUMMARY}` = 'report'")
    reports = client.get_experiment_by_name(report_experiment("amdnn"))
    (report,) = client.search_runs([reports.experiment_id], "")
    assert report.data.tags[TAG_SUMMARY] == "report" and report.data.metrics["cells_total"] == 2
    assert "[amdnn] the runs in MLflow's UI" in finished_grid.output
    assert dashboard.runs_url("http://127.0.0.1:5000", exp.experiment_id) in finished_grid.output


def test_the_html_report_links_each_run_to_its_page(finished_grid):
    html = next((finished_grid.root / "sweep").glob("report.html")).read_text()
    links = dict((run_id, href) for href, run_id in re.findall(r'<a href="([^"]+)" target="_blank">(\w+)</a>', html))
    assert links == {r.info.run_id: f"http://127.0.0.1:5000/#/runs/{r.info.run_id}" for r in finished_grid.runs()}
