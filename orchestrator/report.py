"""The results table: final test accuracy of every cell, model x multiplier, read back from MLflow.

    python -m orchestrator.report [--experiment amdnn] [--tracking-uri URI] [--csv FILE]

One table per data set; rows in the model registry's order, columns in ops.names() order (tables last). A cell that
has not finished shows its state (running, failed, killed, -) instead of a number; several seeds of a cell show their
mean, with the spread and count.
"""
from __future__ import annotations

import argparse
import csv
import io
import statistics
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

from . import paths
from .tracking import FINAL_KEY, TAG_CELL


@dataclass
class Row:
    identity: str
    model: str
    mult: str
    dataset: str
    seed: str
    status: str                    # MLflow run status: FINISHED, RUNNING, FAILED, KILLED, or MISSING (no run yet)
    test_accuracy: float | None
    run_id: str | None


def collect(uri: str, experiment: str, identities: Iterable[str] | None = None) -> list[Row]:
    """One Row per cell run in `experiment` (only those of `identities` if given; missing ones as MISSING)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    runs = []
    if exp is not None:
        runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{TAG_CELL}` != ''",
                                  max_results=50000)
    wanted = list(identities) if identities is not None else None
    rows: dict[str, Row] = {}
    for run in runs:
        tags = run.data.tags
        identity = tags.get(TAG_CELL, "")
        if wanted is not None and identity not in wanted or identity in rows:
            continue
        rows[identity] = Row(identity, tags.get("amdnn.model", "?"), tags.get("amdnn.mult", "?"),
                             tags.get("amdnn.dataset", "?"), tags.get("amdnn.seed", "?"), run.info.status,
                             run.data.metrics.get(FINAL_KEY), run.info.run_id)
    return list(rows.values())


def missing_rows(cells: Sequence[dict], found: Iterable[Row]) -> list[Row]:
    """Rows for cells (dicts with identity, model, mult, dataset, seed) that have no MLflow run yet."""
    have = {row.identity for row in found}
    return [Row(c["identity"], c["model"], c["mult"], c["dataset"], str(c["seed"]), "MISSING", None, None)
            for c in cells if c["identity"] not in have]


def _order(values: set[str], preferred: Sequence[str]) -> list[str]:
    return [v for v in preferred if v in values] + sorted(values - set(preferred))


def _cell_text(rows: list[Row]) -> str:
    done = [r.test_accuracy for r in rows if r.status == "FINISHED" and r.test_accuracy is not None]
    if done:
        mean = statistics.fmean(done)
        if len(done) == 1:
            return f"{mean:.4f}"
        return f"{mean:.4f} ± {statistics.stdev(done):.4f} (n={len(done)})"
    states = {r.status for r in rows}
    for state, text in (("RUNNING", "running"), ("FAILED", "failed"), ("KILLED", "killed"), ("MISSING", "-")):
        if state in states:
            return text
    return "-"


def markdown(rows: Sequence[Row]) -> str:
    """Markdown tables (one per data set) of final test accuracy, model x multiplier."""
    if not rows:
        return "(no runs found)"
    from .config import model_names, mult_names

    try:
        model_order, mult_order = model_names(), mult_names()
    except Exception:  # noqa: BLE001 - a report must print even where models/ops cannot be imported
        model_order, mult_order = [], []
    out = []
    for dataset in sorted({r.dataset for r in rows}):
        subset = [r for r in rows if r.dataset == dataset]
        models = _order({r.model for r in subset}, model_order)
        mults = _order({r.mult for r in subset}, mult_order)
        lines = [f"| Final test accuracy ({dataset}) | " + " | ".join(mults) + " |",
                 "|---|" + "---|" * len(mults)]
        for model in models:
            cells = [_cell_text([r for r in subset if r.model == model and r.mult == mult]) for mult in mults]
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def to_csv(rows: Sequence[Row]) -> str:
    """One line per cell run: model, mult, dataset, seed, status, test_accuracy, run_id, identity."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["model", "mult", "dataset", "seed", "status", "test_accuracy", "run_id", "identity"])
    for r in sorted(rows, key=lambda r: (r.dataset, r.model, r.mult, r.seed)):
        writer.writerow([r.model, r.mult, r.dataset, r.seed, r.status,
                         "" if r.test_accuracy is None else repr(r.test_accuracy), r.run_id or "", r.identity])
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.report", description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=None, help="MLflow experiment; default: conf/config.yaml's")
    parser.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI or <repo>/mlflow.db")
    parser.add_argument("--csv", default=None, help="also write the per-cell CSV to this file")
    args = parser.parse_args(argv)
    if args.experiment is None:
        from omegaconf import OmegaConf

        args.experiment = OmegaConf.load(paths.repo_root() / "conf" / "config.yaml").experiment
    rows = collect(paths.tracking_uri(args.tracking_uri), args.experiment)
    print(markdown(rows))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(to_csv(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
