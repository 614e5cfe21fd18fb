"""The exploration commands (orchestrator.explore):

    python -m orchestrator.explore sensitivity model=MODEL mult=M[,M2] [--exact-one] [--layers SELECTOR]...
                                               [--dry-run] [any launch.py override: dataset=, cluster=, train.epochs=]
    python -m orchestrator.explore search model=MODEL dataset=DATA mult=M [--exact-one] [--steps S]
                                          [--tracking-uri URI] [--experiment NAME] [--dry-run] [overrides]

Each prints the launch.py command it runs (run it again to resume: finished cells are skipped) and runs it. A
problem is reported before anything is launched, with exit status 2.
"""
from __future__ import annotations

import argparse
import sys

from omegaconf import OmegaConf

from orchestrator.common import paths
from orchestrator.explore import grid, search, sensitivity


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.explore", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    study = commands.add_parser("sensitivity", help="the grid approximating one layer at a time (or keeping one "
                                "exact at a time), with both ends")
    study.add_argument("--layers", action="append", default=[], metavar="SELECTOR",
                       help="only the layers this selector picks (a name, group or glob; repeat for more)")
    find = commands.add_parser("search", help="from a finished sensitivity study, a cell per prefix of the layers "
                               "ordered by accuracy lost per share of the multiply-accumulates")
    find.add_argument("--steps", type=int, default=None, help="this many proposals, spread evenly (default: all)")
    find.add_argument("--tracking-uri", default=None, help="the store of the study (default: as launch.py's)")
    find.add_argument("--experiment", default=None, help="the study's experiment (default: as launch.py's)")
    for sub in (study, find):
        sub.add_argument("--exact-one", action="store_true", help="the study keeps one layer exact at a time "
                         "(default: approximates one layer at a time)")
        sub.add_argument("--dry-run", action="store_true", help="print the launch command only")
        sub.add_argument("overrides", nargs="*", help="launch.py overrides: model=, mult=, dataset=, ...")
    return parser


def _default(key: str) -> str:
    config = OmegaConf.load(paths.repo_root() / "conf" / "config.yaml")
    if key == "dataset":
        return next(str(d["dataset"]) for d in config.defaults if isinstance(d, dict) and "dataset" in d)
    return str(config[key])


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    kind = sensitivity.EXACT_ONE if args.exact_one else sensitivity.APPROXIMATE_ONE
    try:
        study = grid.parse(args.overrides)
        if args.command == "sensitivity":
            return grid.run(sensitivity.overrides(study, kind, args.layers), args.dry_run)
        from orchestrator.report.table import collect  # MLflow's store: only the search reads it
        from orchestrator.tracking.importer import import_for

        uri = paths.tracking_uri(args.tracking_uri or study.values.get("tracking_uri"))
        experiment = args.experiment or study.values.get("experiment") or _default("experiment")
        dataset = study.values.get("dataset") or _default("dataset")
        import_for([uri])  # single-writer mode: what the jobs queued goes in first
        ranked, lengths, overrides = search.search_rows(collect(uri, experiment), study, dataset, kind, args.steps)
        print(search.table(ranked, lengths, study.mults[0]), flush=True)
        return grid.run(overrides, args.dry_run)
    except grid.StudyError as e:
        print(f"[amdnn] error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
