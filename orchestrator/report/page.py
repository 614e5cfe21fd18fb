"""The report as one self-contained HTML page (report.files writes it): which runs it covers, per data set its table
(each column headed by its multiplier's colour in the figures), each cell against its baseline, the accuracy-cost
front's optimal cells and the layer sensitivity studies, its figures inlined, then every run."""
from __future__ import annotations

import base64
import html
import time
from pathlib import Path
from typing import Mapping, Sequence

from orchestrator.report.comparisons import Comparison, listed, versus_text
from orchestrator.report.front import Front, axis_label
from orchestrator.report.paired import METHOD, points_text
from orchestrator.report.sensitivity import Study, titles
from orchestrator.report.table import Row, cell_mean, cell_text, column_multipliers
from orchestrator.tracking.dashboard import UI_VARIABLE, run_url, ui_base

STYLE = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:.3em .6em;text-align:right}th{background:#eee}td.label{text-align:left}
td.unfinished{color:#888;font-style:italic;background:#f4f4f4}img{max-width:100%;display:block;margin:1em 0}
small{color:#666}span.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em}"""


def _image(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def _hex(colour: Sequence[float]) -> str:
    return "#" + "".join(f"{round(255 * c):02x}" for c in colour[:3])


def _cell(runs: Sequence[Row]) -> str:
    unfinished = runs and cell_mean(runs) is None
    return f"<td{' class=unfinished' if unfinished else ''}>{html.escape(cell_text(runs))}</td>"


def _comparisons(dataset: str, found: Sequence[Comparison]) -> list[str]:
    mine = listed(found, dataset)
    if not mine:
        return []
    parts = [f"<h3>Against the baseline of the same setting</h3><p><small>Difference in final test accuracy, "
             f"percentage points: mean over the shared seeds [95 % interval] (n pairs); {html.escape(METHOD)}."
             "</small></p><table><tr>" + "".join(f"<th>{h}</th>" for h in ("model", "column", "baseline",
                                                                            "difference", "seeds")) + "</tr>"]
    for c in mine:
        seeds = ", ".join(c.paired.seeds) if c.paired else ""
        parts.append("<tr>" + "".join(f"<td class='label'>{html.escape(v)}</td>" for v in (
            c.row, c.column, c.baseline or "", versus_text(c), seeds)) + "</tr>")
    parts.append("</table>")
    return parts


def _front(dataset: str, fronts: Sequence[Front]) -> list[str]:
    parts = []
    for f in (f for f in fronts if f.dataset == dataset):
        parts.append(f"<h3>{html.escape(f.model)}: accuracy against {html.escape(axis_label(f.figure))}</h3>"
                     f"<p><small>The Pareto-optimal cells ({len(f.optimal)} of {len(f.points)} placed): no other cell "
                     "is at least as accurate and at most as costly." + (
                         f" No {f.figure} figure for {html.escape(', '.join(f.without))}." if f.without else "")
                     + "</small></p><table><tr><th>#</th><th>cell</th><th>relative cost</th><th>accuracy</th>"
                     "<th>seeds</th></tr>")
        parts += [f"<tr><td>{number}</td><td class='label'>{html.escape(p.label)}</td><td>{p.cost:.4f}</td>"
                  f"<td>{p.accuracy:.4f}</td><td>{p.seeds}</td></tr>" for number, p in enumerate(f.optimal, start=1)]
        parts.append("</table>")
    return parts


def _studies(dataset: str, studies: Sequence[Study]) -> list[str]:
    parts = []
    for study, title in zip(studies, titles(studies)):
        if study.dataset != dataset:
            continue
        parts.append(f"<h3>Layer sensitivity: {html.escape(title)}</h3><table><tr><th>layer</th><th>MACs share</th>"
                     "<th>accuracy</th><th>difference to the reference</th></tr>")
        for layer in study.layers:
            share = "-" if layer.share is None else f"{100 * layer.share:.2f} %"
            accuracy = "-" if layer.accuracy is None else f"{layer.accuracy:.4f}"
            versus = points_text(layer.versus) if layer.versus else "-"
            parts.append(f"<tr><td class='label'>{html.escape(layer.layer)}</td><td>{share}</td><td>{accuracy}</td>"
                         f"<td>{html.escape(versus)}</td></tr>")
        parts.append("</table>")
    return parts


def _run_link(run_id: str | None, base: str | None) -> str:
    """A run's id, linked to its page in MLflow's UI where the store is known."""
    if not run_id:
        return "<td class='label'>-</td>"
    if base is None:
        return f"<td class='label'>{html.escape(run_id)}</td>"
    return (f"<td class='label'><a href=\"{html.escape(run_url(base, run_id))}\" target=\"_blank\">"
            f"{html.escape(run_id)}</a></td>")


def html_page(experiment: str, scope: str, rows: Sequence[Row], layout, found: Sequence[Comparison],
              figures_of: Mapping[str, list[Path]], colours: Mapping[str, Sequence[float]],
              uri: str | None = None, explored: tuple[Sequence[Front], Sequence[Study]] = ((), ())) -> str:
    """The page: `layout` is table.grids(rows); images inlined, so the one file is all. With the store's `uri`,
    each run links to its page in MLflow's UI (tracking.dashboard.ui_base: a server's own address, else where
    `mlflow ui` answers)."""
    base = ui_base(uri) if uri is not None else None
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>AMDNN report: {html.escape(experiment)}"
             f"</title><style>{STYLE}</style></head><body>",
             f"<h1>Final test accuracy: experiment {html.escape(experiment)}</h1>",
             f"<p>{html.escape(scope)}</p>",
             f"<p><small>Written {time.strftime('%Y-%m-%d %H:%M:%S %Z')}. Seeds of one cell: mean ± standard "
             "deviation (n). Columns are labelled by the settings that tell them apart, the baseline's too; a "
             "difference is only taken between cells of the same setting. Cells without a finished run show their "
             "state (running, failed, killed, not started); a cell nobody ran is blank.</small></p>"]
    for dataset, columns, body in layout:
        parts.append(f"<h2>{html.escape(dataset)}</h2><table><tr><th>model</th>" + "".join(
            f"<th><span class='swatch' style='background:{_hex(colours[m])}'></span>{html.escape(c)}</th>"
            for c, m in zip(columns, column_multipliers(body))) + "</tr>")
        for row, cells in body:
            parts.append(f"<tr><td class='label'>{html.escape(row)}</td>" + "".join(_cell(r) for r in cells)
                         + "</tr>")
        parts.append("</table>")
        parts += _comparisons(dataset, found)
        parts += _front(dataset, explored[0])
        parts += _studies(dataset, explored[1])
        parts += [_image(path) for path in figures_of.get(dataset, [])]
    where = "" if base is None else f"Each run id opens the run in MLflow's UI at {base}"
    if base is not None and not str(uri).startswith(("http://", "https://")):
        where += (f", where `mlflow ui --backend-store-uri {uri}` answers by default (elsewhere: set {UI_VARIABLE} "
                  "before the report is written)")
    parts.append(f"<h2>Runs</h2><p><small>{html.escape(where)}.</small></p><table><tr>" + "".join(
        f"<th>{h}</th>" for h in ("model", "multiplier", "data set", "seed", "status", "test accuracy", "run id"))
        + "</tr>")
    for r in sorted(rows, key=lambda r: (r.dataset, r.model, r.mult, r.seed)):
        accuracy = "" if r.test_accuracy is None else f"{r.test_accuracy:.4f}"
        parts.append("<tr>" + "".join(f"<td class='label'>{html.escape(str(v))}</td>" for v in (
            r.model, r.mult, r.dataset, r.seed, r.status.lower(), accuracy)) + _run_link(r.run_id, base) + "</tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)
