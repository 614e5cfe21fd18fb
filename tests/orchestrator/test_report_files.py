"""The report's files, figures and MLflow summary run, and what each cell logs beside its metrics, checked against
a real store made by a real short grid: launch.py -m over lenet300 x {native, am16} x seeds {0, 1} on digits (two
epochs each, am16 cells profiled), as a user runs it, plus a cell left running. Every number shown is compared with
the number MLflow holds."""
from __future__ import annotations

import csv
import io
import re
import statistics
import subprocess

import numpy as np
import pytest

from ops.modes import error_stats
from orchestrator.cell.artifacts import MULT_METRIC
from orchestrator.report import figures, files as report_files, table as report
from orchestrator.report.__main__ import main as report_command
from orchestrator.report.summary_run import TAG_SUMMARY, report_experiment
from orchestrator.tracking.tracker import ENERGY_KEY, FINAL_KEY, POWER_KEY, TAG_CELL, Tracker
from tests.orchestrator.helpers import PYTHON, REPO, env

pytestmark = pytest.mark.slow  # the module's grid (4 cells of 2 epochs), trained once: over a minute

GRID = ["-m", "model=lenet300", "mult=native,am16", "seed=0,1", "train.epochs=2", "train.batch_size=64",
        "profile_layers=true"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The grid's folder, store URI and launch output, with a lenet5 x am16 cell whose run is still RUNNING."""
    root = tmp_path_factory.mktemp("grid")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    proc = subprocess.run([PYTHON, str(REPO / "launch.py"), *GRID, f"checkpoint_root={root / 'ck'}",
                           f"tracking_uri={uri}"], cwd=root, env=env(), capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    running = Tracker(uri, "amdnn", "f" * 64, root / "running-cell")
    running.start({"model.name": "lenet5"}, {TAG_CELL: "f" * 64, "amdnn.model": "lenet5", "amdnn.mult": "am16",
                                             "amdnn.dataset": "digits", "amdnn.seed": "0"})
    assert running.flush(patience_s=30, force=True)
    return root, uri, out


def client(uri):
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri)


def cell_runs(uri):
    c = client(uri)
    experiment = c.get_experiment_by_name("amdnn").experiment_id
    return c.search_runs([experiment], filter_string=f"tags.`{TAG_CELL}` != ''", max_results=100)


def test_report_files_and_summary_run_show_the_runs_numbers(store, tmp_path, capsys):
    root, uri, out = store
    sweep_dir = root / re.search(r"\[amdnn\] also in (\S+): report.md", out)[1]
    assert {p.name for p in sweep_dir.iterdir()} >= {"report.md", "report.csv", "cells.csv", "report.html",
                                                    "heatmap-digits.png", "curves-digits.png"}
    assert "Covers this sweep's 4 cell(s) of experiment amdnn: 4 finished." in out
    assert "the experiment's report is logged to MLflow run" in out

    assert report_command(["--tracking-uri", uri, "--experiment", "amdnn", "--out", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert "| lenet5 |  | running |" in printed   # blank: nobody ran lenet5 under native
    assert "Covers every cell run of experiment amdnn: 5 run(s), 4 finished, 1 running;" in printed

    # The CSV: one line per cell run, each finished accuracy the run's own final metric, bit for bit.
    lines = list(csv.DictReader(io.StringIO((tmp_path / "r" / "report.csv").read_text())))
    runs = {run.info.run_id: run for run in cell_runs(uri)}
    assert len(lines) == len(runs) == 5
    for line in lines:
        metrics = runs[line["run_id"]].data.metrics
        if line["status"] == "FINISHED":
            assert float(line["test_accuracy"]) == metrics[FINAL_KEY]
        else:
            assert (line["model"], line["status"], line["test_accuracy"]) == ("lenet5", "RUNNING", "")

    # The summary run: one per experiment, in an experiment of its own (never among the cells), found by its tag,
    # holding the files the command wrote.
    c = client(uri)
    assert not c.search_runs([c.get_experiment_by_name("amdnn").experiment_id], f"tags.`{TAG_SUMMARY}` = 'report'")
    experiment = c.get_experiment_by_name(report_experiment("amdnn")).experiment_id
    (summary,) = c.search_runs([experiment], filter_string=f"tags.`{TAG_SUMMARY}` = 'report'")
    assert summary.info.status == "FINISHED" and summary.info.run_name == "report"
    names = {a.path for a in c.list_artifacts(summary.info.run_id, "report")}
    assert names == {f"report/{n}" for n in ("report.md", "report.csv", "cells.csv", "report.html",
                                             "heatmap-digits.png", "curves-digits.png")}
    logged = c.download_artifacts(summary.info.run_id, "report/report.csv", str(tmp_path / "down"))
    assert open(logged).read() == (tmp_path / "r" / "report.csv").read_text()
    # published twice: at the sweep's end (4 cells), then by the command (the running one too)
    assert [m.value for m in c.get_metric_history(summary.info.run_id, "cells_total")] == [4, 5]
    assert [m.value for m in c.get_metric_history(summary.info.run_id, "cells_finished")] == [4, 4]

    page = (tmp_path / "r" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "<td class=unfinished>running</td>" in page
    assert re.search(r"<td>0\.\d{4} ± 0\.\d{4} \(n=2\)</td>", page)


def test_heatmap_draws_the_table(store):
    _, uri, _ = store
    rows = report.collect(uri, "amdnn")
    ((dataset, columns, body),) = report.tables(rows)
    data = report_files.heatmap_data(rows)[dataset]
    fig = figures.heatmap(dataset, **data)
    accuracy, difference = (ax.images[0].get_array() for ax in fig.axes if ax.images)
    assert columns == data["columns"] == ["native", "am16"] and [r for r, _ in body] == data["rows"]
    by_cell = {(r.model, r.mult): [] for r in rows}
    for r in rows:
        if r.status == "FINISHED":
            by_cell[(r.model, r.mult)].append(client(uri).get_run(r.run_id).data.metrics[FINAL_KEY])
    for i, (model, texts) in enumerate(body):
        for j, text in enumerate(texts):
            finished = by_cell.get((model, columns[j]), [])
            if not finished:
                assert accuracy.mask[i, j] and difference.mask[i, j] and data["texts"][i][j] == text
                continue
            assert accuracy[i, j] == pytest.approx(100 * statistics.fmean(finished), abs=1e-9)
            assert float(text.split()[0]) == pytest.approx(statistics.fmean(finished), abs=5e-5)  # the table's
            assert text.endswith(f"(n={len(finished)})")
            if columns[j] == "native":   # the baseline: no difference to itself
                assert difference.mask[i, j] and data["difference_texts"][i][j] == "baseline"
            else:   # the same seeds on both sides: the paired mean is the difference of the means
                assert difference[i, j] == pytest.approx(accuracy[i, j] - accuracy[i, 0], abs=1e-9)
    assert body[1][1] == ["", "running"]
    figures.pyplot().close(fig)


def test_grid_curves_are_the_seeds_mean_of_the_logged_epochs(store):
    from orchestrator.report.histories import grid_curves

    _, uri, _ = store
    rows = report.collect(uri, "amdnn")
    curves = grid_curves(uri, rows)["digits"]
    assert set(curves) == {"lenet300"} and set(curves["lenet300"]) == {"native", "am16"}
    c = client(uri)
    for mult, cell in curves["lenet300"].items():
        points, spread = [p[:3] for p in cell.mean], [p[3:] for p in cell.mean]
        assert cell.partial == []
        seeds = [r for r in rows if r.mult == mult and r.model == "lenet300"]
        test_acc = [[m.value for m in sorted(c.get_metric_history(r.run_id, "test_accuracy"), key=lambda m: m.step)]
                    for r in seeds]
        loss = [[m.value for m in sorted(c.get_metric_history(r.run_id, "loss"), key=lambda m: m.step)]
                for r in seeds]
        assert [p[0] for p in points] == [1, 2]
        assert [p[1] for p in points] == pytest.approx(np.mean(test_acc, axis=0).tolist(), abs=1e-12)
        assert [p[2] for p in points] == pytest.approx(np.mean(loss, axis=0).tolist(), abs=1e-12)
        assert [s[0] for s in spread] == pytest.approx(np.std(test_acc, axis=0, ddof=1).tolist(), abs=1e-12)
        assert [s[2] for s in spread] == [2, 2]
    fig = figures.grid_curves("digits", curves, figures.colours(report.multipliers(rows)))
    drawn = {line.get_label(): line.get_ydata() for line in fig.axes[0].lines}
    am16 = curves["lenet300"]["am16"].mean
    assert drawn["am16 (mean of 2 seeds ± std)"] == pytest.approx([100 * p[1] for p in am16])
    figures.pyplot().close(fig)


def test_each_cell_logs_its_multiplier_profile_and_curves(store, tmp_path):
    _, uri, _ = store
    c = client(uri)
    am16 = error_stats.summary("am16")
    for run in cell_runs(uri):
        if run.info.status != "FINISHED":
            continue
        parts = {a.path for a in c.list_artifacts(run.info.run_id)}
        files = {a.path for part in parts for a in c.list_artifacts(run.info.run_id, part)}
        assert "curves/learning-curves.png" in files
        assert "layers/layer-map.md" in files  # every cell: the multiplier of each layer, the relative energy
        if run.data.tags["amdnn.mult"] == "native":
            assert parts == {"curves", "layers", "record", "weights"}
            assert {k for k in run.data.metrics if k.startswith("mult_")} == {ENERGY_KEY, POWER_KEY}
            assert run.data.metrics[ENERGY_KEY] == run.data.metrics[POWER_KEY] == 1.0  # every layer exact
            continue
        # am16 has no published figure (docs/multipliers.md)
        assert ENERGY_KEY not in run.data.metrics and POWER_KEY not in run.data.metrics
        assert files >= {"multiplier/am16-error-map.png", "multiplier/am16-errors.npz",
                         "multiplier/am16-summary.json", "profile/layer-profile.md", "profile/layer-profile.csv"}
        for key in ("mean", "bias", "max", "grid_mean", "grid_max"):
            assert run.data.metrics[MULT_METRIC.format(key)] == am16[key]
        errors = c.download_artifacts(run.info.run_id, "multiplier/am16-errors.npz", str(tmp_path / run.info.run_id))
        with np.load(errors) as data:
            assert np.abs(data["relative_error"]).mean() == pytest.approx(am16["grid_mean"], abs=1e-15)
        table = c.download_artifacts(run.info.run_id, "profile/layer-profile.csv", str(tmp_path / run.info.run_id))
        layers = list(csv.DictReader(open(table)))
        assert [r["layer"] for r in layers] == ["fc1", "fc2", "predictions", "total"]
        # batch 64 of 8x8 digits: fc1 multiplies 64 x 64 inputs by 300 units
        assert [int(r["mults_per_forward"]) for r in layers] == [64 * 64 * 300, 64 * 300 * 100, 64 * 100 * 10,
                                                                 64 * (64 * 300 + 300 * 100 + 100 * 10)]
        for r in layers:
            assert float(r["forward_am_ms"]) > 0 and float(r["forward_native_ms"]) > 0
            assert float(r["forward_ratio"]) == pytest.approx(float(r["forward_am_ms"]) / float(r["forward_native_ms"]))


def test_the_resume_cron_reports_a_grid_once_when_its_last_cell_finishes(store, tmp_path):
    from orchestrator.cluster.grid import Grid
    from orchestrator.cluster.grid_report import report_if_complete

    _, uri, _ = store
    records = [{"identity": r.data.tags[TAG_CELL], "tracking_uri": uri, "experiment": "amdnn"}
               for r in cell_runs(uri) if r.info.status == "FINISHED"]
    grid = Grid(tmp_path / "state")
    out = io.StringIO()
    assert report_if_complete(grid, records, ["finished", "running", "finished", "finished"], out) == []
    assert not (grid.root / "report").exists()
    assert report_if_complete(grid, records, ["finished"] * 4, out) == ["amdnn"]
    assert "every cell finished: the report of experiment amdnn (4 cells)" in out.getvalue()
    assert (grid.root / "report" / "amdnn" / "heatmap-digits.png").exists()
    assert report_if_complete(grid, records, ["finished"] * 4, out) == []  # once
    c = client(uri)
    reports = c.get_experiment_by_name(report_experiment("amdnn")).experiment_id
    (summary,) = c.search_runs([reports], f"tags.`{TAG_SUMMARY}` = 'report'")
    assert c.get_metric_history(summary.info.run_id, "cells_total")[-1].value == 5
