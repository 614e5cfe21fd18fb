"""The report as files: what `python -m orchestrator.report`, a sweep's end and the resume cron write, and what the
summary run of the experiment carries in MLflow.

    report.md                   the model x mult tables (one per data set), as printed
    report.csv                  one line per cell run (orchestrator.report.table.to_csv)
    report.html                 one self-contained page: the tables, every figure inlined, the runs
    heatmap-<dataset>.png       final test accuracy and the difference to native (or acc32), figures.heatmap
    curves-<dataset>.png        test accuracy and loss against epoch, one line per multiplier, figures.grid_curves

All of them show the same cells: table.grids is their one source. A cell with no finished run is drawn grey with
its state (running, failed, killed, -), never as a number.
"""
from __future__ import annotations

import base64
import html
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from orchestrator.report import figures
from orchestrator.report.histories import grid_curves
from orchestrator.report.summary_run import publish
from orchestrator.report.table import (Row, cell_mean, cell_text, collect, finished_accuracies, grids, markdown,
                                       missing_rows, to_csv)
from orchestrator.tracking.importer import writing

MARKDOWN, CSV, HTML = "report.md", "report.csv", "report.html"


def heatmap_name(dataset: str) -> str:
    return f"heatmap-{dataset}.png"


def curves_name(dataset: str) -> str:
    return f"curves-{dataset}.png"


def heatmap_data(rows: Sequence[Row]) -> dict[str, dict]:
    """{dataset: the arguments of figures.heatmap}: column and row labels, and [rows, columns] arrays of the mean,
    standard deviation (NaN below two seeds) and count of the finished seeds' accuracies (mean NaN where none has
    finished), and the cell texts of the table."""
    out = {}
    for dataset, columns, body in grids(rows):
        done = [[finished_accuracies(runs) for runs in cells] for _, cells in body]
        shape = (len(body), len(columns))
        out[dataset] = {
            "columns": columns, "rows": [row for row, _ in body],
            "means": np.array([[statistics.fmean(a) if a else math.nan for a in line] for line in done]).reshape(shape),
            "stds": np.array([[statistics.stdev(a) if len(a) > 1 else math.nan for a in line]
                              for line in done]).reshape(shape),
            "counts": np.array([[len(a) for a in line] for line in done], dtype=int).reshape(shape),
            "texts": [[cell_text(runs) for runs in cells] for _, cells in body]}
    return out


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


STYLE = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:.3em .6em;text-align:right}th{background:#eee}td.label{text-align:left}
td.unfinished{color:#888;font-style:italic;background:#f4f4f4}img{max-width:100%;display:block;margin:1em 0}
small{color:#666}"""


def html_page(experiment: str, rows: Sequence[Row], figures_of: dict[str, list[Path]]) -> str:
    """The page: per data set its table and figures, then every run; images inlined, so the one file is all."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>AMDNN report: {html.escape(experiment)}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>Final test accuracy: experiment {html.escape(experiment)}</h1>",
             f"<p><small>{len(rows)} cell run(s); written {time.strftime('%Y-%m-%d %H:%M:%S %Z')}. "
             "Seeds of one cell: mean ± standard deviation (n). Cells without a finished run show their state "
             "(running, failed, killed, - for not started).</small></p>"]
    for dataset, columns, body in grids(rows):
        parts.append(f"<h2>{html.escape(dataset)}</h2><table><tr><th>model</th>"
                     + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>")
        for row, cells in body:
            parts.append(f"<tr><td class='label'>{html.escape(row)}</td>" + "".join(
                f"<td{'' if cell_mean(runs) is not None else ' class=unfinished'}>{html.escape(cell_text(runs))}</td>"
                for runs in cells) + "</tr>")
        parts.append("</table>")
        parts += [_image(path) for path in figures_of.get(dataset, [])]
    parts.append("<h2>Runs</h2><table><tr>" + "".join(
        f"<th>{h}</th>" for h in ("model", "multiplier", "data set", "seed", "status", "test accuracy", "run id"))
        + "</tr>")
    for r in sorted(rows, key=lambda r: (r.dataset, r.model, r.mult, r.seed)):
        accuracy = "" if r.test_accuracy is None else f"{r.test_accuracy:.4f}"
        parts.append("<tr>" + "".join(f"<td class='label'>{html.escape(str(v))}</td>" for v in (
            r.model, r.mult, r.dataset, r.seed, r.status.lower(), accuracy, r.run_id or "-")) + "</tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)


def write_report(rows: Sequence[Row], out_dir: str | Path, experiment: str, uri: str | None = None) -> list[Path]:
    """Write every file of the report into out_dir; the learning curves only with `uri` (read from MLflow).
    Returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / MARKDOWN, out / CSV]
    (out / MARKDOWN).write_text(markdown(rows) + "\n")
    (out / CSV).write_text(to_csv(rows))
    figures_of: dict[str, list[Path]] = {}
    for dataset, data in heatmap_data(rows).items():
        path = out / heatmap_name(dataset)
        figures.save(figures.heatmap(dataset, **data), path)
        figures_of.setdefault(dataset, []).append(path)
    if uri is not None and any(r.run_id for r in rows):
        for dataset, curves in grid_curves(uri, rows).items():
            if curves:
                path = out / curves_name(dataset)
                figures.save(figures.grid_curves(dataset, curves), path)
                figures_of.setdefault(dataset, []).append(path)
    (out / HTML).write_text(html_page(experiment, rows, figures_of))
    written.append(out / HTML)
    return written + [p for paths in figures_of.values() for p in paths]


def publish_experiment(uri: str, experiment: str, out_dir: str | Path | None = None, cells: Sequence[dict] = (),
                       to_mlflow: bool = True) -> tuple[list[Row], list[Path], str | None]:
    """The report of every cell run of `experiment` (and of `cells`, table.missing_rows's dicts, not started yet):
    written into out_dir (default: a temporary folder) and, unless to_mlflow is False, logged to the experiment's
    summary run (orchestrator.report.summary_run). Returns (rows, paths written, the summary run's id or None)."""
    rows = collect(uri, experiment)
    rows += missing_rows(cells, rows)
    with tempfile.TemporaryDirectory(prefix="amdnn-report-") as scratch:
        folder = Path(out_dir) if out_dir is not None else Path(scratch)
        written = write_report(rows, folder, experiment, uri)
        run_id = None
        if to_mlflow and rows:  # no run, no summary: a report command never creates an experiment
            with writing(uri):  # the store's one writer (single-writer mode: the importers hold the same lock)
                run_id = publish(uri, experiment, folder, rows)
    return rows, written if out_dir is not None else [], run_id
