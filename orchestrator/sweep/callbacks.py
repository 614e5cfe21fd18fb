"""Hydra callbacks of a sweep: check every cell before the first one runs and describe the launch its cells' runs nest
under (tracking.launches); print the results table and the address of the runs in MLflow's UI at the end.

Configured in conf/config.yaml (hydra.callbacks.amdnn), so they run in the launching process whatever the launcher:
a local sweep, or a cluster sweep that only submits (whose table then shows the cells still queued as "not
started"). The table covers the sweep's own cells and says so (report.scope). At the end the sweep's report files
(orchestrator.report.files) go into the sweep folder, and a local sweep, whose cells have run, logs the
experiment's report to its summary run in MLflow (a cluster grid's is logged by the resume cron when its last cell
finishes).
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from hydra import compose
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from orchestrator.common import cellfiles, paths, permissions
from orchestrator.config.cell import resolve
from orchestrator.config.validate import ConfigError
from orchestrator.report.files import publish_experiment, report_markdown, write_report
from orchestrator.report.scope import sweep_scope
from orchestrator.report.table import collect, missing_rows
from orchestrator.schedulers.limits import sweep_problems
from orchestrator.sweep.launching import mlflow_ui_command
from orchestrator.sweep.progress import SweepProgress
from orchestrator.tracking import dashboard, launches
from orchestrator.tracking.importer import import_for
from orchestrator.tracking.server_access import server_problem

log = logging.getLogger(__name__)


def sweep_overrides(config: DictConfig) -> list[list[str]]:
    """The override list of every job of the sweep, as Hydra's basic sweeper expands the command line."""
    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def cells_of_sweep(config: DictConfig) -> list[dict]:
    """Compose and resolve every cell of the sweep; raise ConfigError naming the first bad cell's overrides."""
    cells = []
    for overrides in sweep_overrides(config):
        cfg = compose(config_name=config.hydra.job.config_name, overrides=overrides)
        try:
            cell = resolve(cfg)
        except ConfigError as e:
            raise ConfigError(f"sweep cell {' '.join(overrides) or '(defaults)'}: {e}") from None
        cells.append({"identity": cell.identity, "model": cell.model.name, "mult": cell.mult.label,
                      "dataset": cell.dataset.name, "seed": cell.seed, "defining": cell.defining_config(),
                      "cluster": cell.as_dict()["cluster"], "epochs": cell.train.epochs,
                      "tracking_uri": cell.tracking.uri, "done": _done(cell.cell_dir, cell.identity)})
    return cells


def _done(cell_dir: str, identity: str) -> bool:
    done = cellfiles.read_json(Path(cell_dir) / cellfiles.DONE)
    return bool(done) and done.get("identity") == identity


class SweepCallbacks(Callback):
    def __init__(self) -> None:
        self.cells: list[dict] | None = None
        self.progress = None  # a SweepProgress, for sweeps whose cells run in this process (cluster=local)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        permissions.restrict(bool(config.get("share_with_group", False)))  # before the sweep writes anything
        # Before anything is trained or submitted: one bad value anywhere in the grid stops the whole sweep.
        # SystemExit, because Hydra turns a callback's exceptions into warnings and carries on.
        try:
            self.cells = cells_of_sweep(config)
        except ConfigError as e:
            print(f"[amdnn] sweep refused, nothing launched: {e}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
        problems = sweep_problems(c["cluster"] for c in self.cells)
        # A tracking server that refuses the user (or lets anyone read the password file) fails every job later.
        problems += [p for p in map(server_problem, sorted({c["tracking_uri"] for c in self.cells})) if p]
        if problems:  # a job no node can run would pend for ever: say so before anything is submitted
            print("[amdnn] sweep refused, nothing submitted:\n  - " + "\n  - ".join(problems), file=sys.stderr,
                  flush=True)
            raise SystemExit(2)
        print(f"[amdnn] sweep of {len(self.cells)} cell(s), all valid", flush=True)
        # The launch's parent run in MLflow (tracking.launches): the cells resolved from here on carry it, in this
        # process, in the cell processes it starts, and in the pickles of cluster jobs.
        launches.to_environment(launches.describe(str(config.experiment), self.cells, sys.argv,
                                                  left=sum(not c["done"] for c in self.cells)))
        if not any(c["cluster"].get("scheduler") for c in self.cells):
            self.progress = SweepProgress(self.cells)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.progress is not None:  # in a cluster job this object is new: no progress there
            print(self.progress.start(int(config.hydra.job.num)), flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        if self.progress is not None:
            value = getattr(job_return, "_return_value", None)
            self.progress.end(value if isinstance(value, dict) else None)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        os.environ.pop(launches.VARIABLE, None)  # a later launch in this process is another launch
        uri = paths.tracking_uri(config.get("tracking_uri"))
        try:
            import_for([uri])
            rows = collect(uri, config.experiment, [c["identity"] for c in self.cells or []] or None)
            rows += missing_rows(self.cells or [], rows)
        except Exception as e:  # noqa: BLE001 - the sweep itself went through; say why there is no table
            print(f"[amdnn] cannot read results from {uri}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            return
        scope = sweep_scope(rows, config.experiment)
        print(f"\n{report_markdown(rows, scope)}\n", flush=True)
        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            written = write_report(rows, sweep_dir, config.experiment, uri, scope=scope)
            print(f"[amdnn] also in {sweep_dir}: {', '.join(p.name for p in written)}", flush=True)
            if config.cluster.get("scheduler") is None:  # a local sweep has finished its cells: publish them
                _, _, run_id = publish_experiment(uri, config.experiment, cells=self.cells or [])
                print(f"[amdnn] the experiment's report is logged to MLflow run {run_id} (\"report\")", flush=True)
            url = dashboard.experiment_runs_url(uri, config.experiment)
            if url:
                print(f"[amdnn] the runs in MLflow's UI ({mlflow_ui_command(uri)}): {url}", flush=True)
        except Exception as e:  # noqa: BLE001 - the sweep itself went through and its table is printed above
            print(f"[amdnn] report files not written: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
