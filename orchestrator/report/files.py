"""The report as files: what `python -m orchestrator.report`, a sweep's end and the resume cron write, and what the
summary run of the experiment carries in MLflow.

    report.md                   which runs it covers, the model x mult tables (one per data set) and each cell
                                against its baseline, as printed
    report.csv                  one line per cell run (orchestrator.report.table.to_csv)
    cells.csv                   one line per table cell: its seeds' mean, std and n, and the paired comparison
                                with its baseline (report.comparisons.to_csv)
    report.html                 one self-contained page of all of it, every figure inlined (report.page)
    heatmap-<dataset>.png       final test accuracy and the paired difference to the baseline, figures.heatmap
    curves-<dataset>.png        test accuracy and loss against epoch, per column the seeds' mean and spread and
                                each unfinished seed dashed, figures.grid_curves
    front.csv, front-<dataset>.png
                                accuracy against relative multiplication energy (or power), the Pareto-optimal
                                cells marked (report.front), where any cell has a cost figure
    sensitivity.csv, sensitivity-<dataset>-<model>-<n>.png
                                each layer sensitivity study: every layer's accuracy change beside its share of
                                the multiply-accumulates (report.sensitivity), where the runs hold one

All of them show the same cells: table.grids is their one source, and a multiplier has one colour in every figure. A
cell with no finished run is drawn grey with its state (running, failed, killed, not started), a cell nobody ran is
blank, never a number.
"""
from __future__ import annotations

import math
import statistics
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from orchestrator.report import comparisons as compare, exploration_figures, figures, front, sensitivity
from orchestrator.report.histories import grid_curves
from orchestrator.report.page import html_page
from orchestrator.report.scope import experiment_scope
from orchestrator.report.summary_run import publish
from orchestrator.report.table import Row, cell_text, collect, finished_accuracies, grids, markdown, missing_rows, \
    multipliers, to_csv
from orchestrator.tracking.importer import writing

MARKDOWN, CSV, CELLS_CSV, HTML = "report.md", "report.csv", "cells.csv", "report.html"
FRONT_CSV, SENSITIVITY_CSV = "front.csv", "sensitivity.csv"


def heatmap_name(dataset: str) -> str:
    return f"heatmap-{dataset}.png"


def curves_name(dataset: str) -> str:
    return f"curves-{dataset}.png"


def front_name(dataset: str) -> str:
    return f"front-{dataset}.png"


def sensitivity_name(study: sensitivity.Study, number: int) -> str:
    return f"sensitivity-{study.dataset}-{study.model}-{number}.png"


def report_markdown(rows: Sequence[Row], scope: str, found: Sequence[compare.Comparison] | None = None,
                    explored: tuple[Sequence[front.Front], Sequence[sensitivity.Study]] | None = None) -> str:
    """What the report prints and report.md holds: the scope line, the tables, each cell against its baseline, the
    accuracy-cost fronts and the layer sensitivity studies."""
    found = compare.comparisons(rows) if found is None else found
    fronts, studies = (front.fronts(rows), sensitivity.studies(rows)) if explored is None else explored
    parts = [scope, markdown(rows), compare.markdown(found), front.markdown(fronts), sensitivity.markdown(studies)]
    return "\n\n".join(part for part in parts if part)


def _difference_text(c: compare.Comparison | None) -> str:
    if c is None:
        return ""
    if c.baseline is None:
        return "baseline" if c.runs[0].mult in compare.REFERENCE_MULTS else "no baseline\nof this setting"
    p = c.paired
    if p is None:
        return "no seed\nfinished by both"
    text = f"{100 * p.mean:+.1f}"
    if math.isfinite(p.low):
        text += f"\n[{100 * p.low:+.1f}, {100 * p.high:+.1f}]"
    return f"{text} (n={p.n})"


def heatmap_data(rows: Sequence[Row], found: Sequence[compare.Comparison] | None = None) -> dict[str, dict]:
    """{dataset: the arguments of figures.heatmap}: column and row labels, and [rows, columns] arrays of the mean,
    standard deviation (NaN below two seeds) and count of the finished seeds' accuracies (mean NaN where none has
    finished), the cell texts of the table, and, where any cell has a baseline, the paired mean differences to it
    (NaN where there is none) and their texts (with the 95 % interval)."""
    found = compare.comparisons(rows) if found is None else found
    by_cell = {(c.dataset, c.row, c.column): c for c in found}
    out = {}
    for dataset, columns, body in grids(rows):
        done = [[finished_accuracies(runs) for runs in cells] for _, cells in body]
        shape = (len(body), len(columns))
        labels = [row for row, _ in body]
        of = [[by_cell.get((dataset, row, column)) for column in columns] for row in labels]
        differences = np.array([[c.paired.mean if c is not None and c.paired else math.nan for c in line]
                                for line in of]).reshape(shape)
        out[dataset] = {
            "columns": columns, "rows": labels,
            "means": np.array([[statistics.fmean(a) if a else math.nan for a in line] for line in done]).reshape(shape),
            "stds": np.array([[statistics.stdev(a) if len(a) > 1 else math.nan for a in line]
                              for line in done]).reshape(shape),
            "counts": np.array([[len(a) for a in line] for line in done], dtype=int).reshape(shape),
            "texts": [[cell_text(runs) for runs in cells] for _, cells in body]}
        if any(c is not None and c.baseline is not None for line in of for c in line):
            out[dataset]["differences"] = differences
            out[dataset]["difference_texts"] = [[_difference_text(c) for c in line] for line in of]
    return out


def write_report(rows: Sequence[Row], out_dir: str | Path, experiment: str, uri: str | None = None,
                 scope: str | None = None) -> list[Path]:
    """Write every file of the report into out_dir; the learning curves only with `uri` (read from MLflow). `scope`
    says which runs the report covers (default: every run of the experiment). Returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scope = experiment_scope(rows, experiment) if scope is None else scope
    found = compare.comparisons(rows)
    fronts, studies = front.fronts(rows), sensitivity.studies(rows)
    (out / MARKDOWN).write_text(report_markdown(rows, scope, found, (fronts, studies)) + "\n")
    (out / CSV).write_text(to_csv(rows))
    (out / CELLS_CSV).write_text(compare.to_csv(found))
    written = [out / MARKDOWN, out / CSV, out / CELLS_CSV]
    if fronts:
        (out / FRONT_CSV).write_text(front.to_csv(fronts))
        written.append(out / FRONT_CSV)
    if studies:
        (out / SENSITIVITY_CSV).write_text(sensitivity.to_csv(studies))
        written.append(out / SENSITIVITY_CSV)
    layout = grids(rows)
    colours = figures.colours(multipliers(rows))
    figures_of: dict[str, list[Path]] = {}
    for dataset, data in heatmap_data(rows, found).items():
        path = out / heatmap_name(dataset)
        figures.save(figures.heatmap(dataset, **data), path)
        figures_of.setdefault(dataset, []).append(path)
    if uri is not None and any(r.run_id for r in rows):
        for dataset, curves in grid_curves(uri, rows).items():
            if curves:
                path = out / curves_name(dataset)
                figures.save(figures.grid_curves(dataset, curves, colours), path)
                figures_of.setdefault(dataset, []).append(path)
    for dataset in sorted({f.dataset for f in fronts}):
        path = out / front_name(dataset)
        figures.save(exploration_figures.front(dataset, [f for f in fronts if f.dataset == dataset], colours), path)
        figures_of.setdefault(dataset, []).append(path)
    for number, (study, title) in enumerate(zip(studies, sensitivity.titles(studies)), start=1):
        path = out / sensitivity_name(study, number)
        figures.save(exploration_figures.sensitivity(study, title), path)
        figures_of.setdefault(study.dataset, []).append(path)
    (out / HTML).write_text(html_page(experiment, scope, rows, layout, found, figures_of, colours, uri,
                                      (fronts, studies)))
    return written + [out / HTML] + [p for paths in figures_of.values() for p in paths]


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
