"""The results table from MLflow, printed and written as files:

    python -m orchestrator.report [--experiment amdnn] [--tracking-uri URI] [--csv FILE] [--out DIR] [--no-mlflow]

prints the tables (report.table) and writes them, with a heatmap and the learning curves per data set, into DIR
(report.files: markdown, CSV, a self-contained HTML page, PNGs), then logs those files to the experiment's summary
run in MLflow (report.summary_run), so the dashboard shows them.
"""
from __future__ import annotations

import argparse
import gc
import sys

from omegaconf import OmegaConf

from orchestrator.common import paths
from orchestrator.report.files import publish_experiment, report_markdown
from orchestrator.report.scope import experiment_scope
from orchestrator.report.table import to_csv
from orchestrator.tracking.importer import import_for

DEFAULT_OUT = "reports"            # the command's files go to ./reports/<experiment>/ unless --out says otherwise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.report", description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default=None, help="MLflow experiment; default: conf/config.yaml's")
    parser.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI or <repo>/mlflow.db")
    parser.add_argument("--csv", default=None, help="also write the per-cell CSV to this file")
    parser.add_argument("--out", default=None, help=f"folder of the report's files (default: {DEFAULT_OUT}/EXPERIMENT)")
    parser.add_argument("--no-mlflow", action="store_true", help="write the files only; do not log them to the "
                        "experiment's summary run")
    args = parser.parse_args(argv)
    if args.experiment is None:
        args.experiment = OmegaConf.load(paths.repo_root() / "conf" / "config.yaml").experiment
    out = args.out or f"{DEFAULT_OUT}/{args.experiment}"
    uri = paths.tracking_uri(args.tracking_uri)
    import_for([uri])  # single-writer mode: what the jobs queued goes in first
    rows, written, run_id = publish_experiment(uri, args.experiment, out, to_mlflow=not args.no_mlflow)
    print(report_markdown(rows, experiment_scope(rows, args.experiment)))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(to_csv(rows))
    print(f"[amdnn] report written: {', '.join(str(p) for p in written)}")
    if run_id:
        print(f"[amdnn] logged as the artifacts of run {run_id} (named \"report\") of experiment {args.experiment}")
    return 0


if __name__ == "__main__":
    code = main()
    # The interpreter's last collections at exit walk every object MLflow, SQLAlchemy and matplotlib made: 0.7 CPU s,
    # 0.8-1.4 s of wall time after the report is written (measured, docs/tracking.md). Frozen, the OS frees them.
    gc.freeze()
    sys.exit(code)
