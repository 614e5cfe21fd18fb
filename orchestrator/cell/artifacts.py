"""What a training cell logs to its MLflow run besides metrics: the files of CELL_DIR/artifacts/<part>/, queued
through the cell's tracker (so a tracking outage loses none of them) and shown by the dashboard under <part>/.

    multiplier/   at the start: the multiplier's error summary and map (ops.describe), its statistics as
                  mult_*_rel_error metrics at step 0: the dashboard shows what the multiplier does beside what
                  it did to training
    layers/       at the start: every multiplying layer with its multiplier, gradient mode, multiply-accumulates per
                  image and relative energy (models.layer_list: layer-map.md, layer-map.csv), and the network's
                  relative multiplication energy and power as the metrics mult_relative_energy and
                  mult_relative_power at step 0 (each where every layer's multiplier has that published figure)
    profile/      at the start, with profile_layers=true: every AM layer timed against the native one
                  (models.profile), as markdown and CSV
    record/       at the start: the reproducibility record (orchestrator.cell.record): commit, dirty flag and
                  diff, installed packages, the resolved config as YAML, host, device and ops build
    curves/       at the end: the cell's learning curves (report.figures.cell_curves) from its per-epoch metrics
    weights/      at the end: the final weights (final_weights.npz, by Keras variable path), which
                  `python -m orchestrator.weights RUN_ID` loads back into the model

Each part is made once per cell: a resumed attempt finds the part's marker and does not make it again. None of
them may stop training: a failure is logged as a warning and the cell goes on.
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Mapping, Sequence

from models import layer_list, profile
from ops.modes import describe
from ops.modes.multipliers import NATIVE

from orchestrator.cell import record
from orchestrator.common.cellfiles import ARTIFACTS, FINAL_WEIGHTS, read_json, write_json
from orchestrator.config.cell import CellConfig
from orchestrator.report import figures
from orchestrator.tracking.tracker import ENERGY_KEY, POWER_KEY, Tracker

log = logging.getLogger(__name__)

MULT_METRIC = "mult_{}_rel_error"  # mult_mean_rel_error, mult_bias_rel_error, ... mult_grid_mean_rel_error
PROFILE_REPEATS = 10             # timed calls per pass in a cell's profile (the command's default is 20)


def part_folder(cell_dir: Path, part: str) -> Path:
    return Path(cell_dir) / ARTIFACTS / part


def done_marker(cell_dir: Path, part: str) -> Path:
    """Beside the part's folder (not in it: the folder is what the run gets): its files are made and queued."""
    return Path(cell_dir) / ARTIFACTS / f".{part}.queued"


def _once(cell_dir: Path, part: str, tracker: Tracker, make) -> None:
    """Make the part's files with make(folder), queue them, mark the folder; skip a part already made."""
    folder = part_folder(cell_dir, part)
    if done_marker(cell_dir, part).exists():
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        make(folder)
    except Exception as e:  # noqa: BLE001 - an artifact is never worth a training run
        log.warning("cell artifacts %s not made: %s: %s", part, type(e).__name__, e)
        print(f"[amdnn] {part} artifacts not made: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return
    tracker.log_artifacts(folder, part)
    write_json(done_marker(cell_dir, part), {"part": part})


def log_multiplier(cfg: CellConfig, cell_dir: Path, tracker: Tracker) -> None:
    """The multiplier's error summary, map and statistics (metrics mult_*) of mult.name's multiplier (the one every
    layer without a rule of its own takes); nothing for native."""
    if cfg.mult.name == NATIVE:
        return

    def make(folder: Path) -> None:
        summary = describe.write(cfg.mult.spec, folder)
        numbers = {MULT_METRIC.format(key): value for key, value in summary.items() if isinstance(value, float)}
        tracker.log_metrics(0, numbers, check=MULT_METRIC.format("mean"))

    _once(cell_dir, "multiplier", tracker, make)


def log_layers(cfg: CellConfig, cell_dir: Path, tracker: Tracker, model) -> None:
    """The per-layer map of the cell's model as built (layer-map.md and .csv) and its relative multiplication energy
    and power (ENERGY_KEY, POWER_KEY: each where every layer's multiplier has that published figure)."""

    def make(folder: Path) -> None:
        rows = layer_list.layer_rows(cfg.model.name, model, cfg.layer_settings())
        title = f"{cfg.model.name} under {cfg.mult.label} on {cfg.dataset.name}: the multiplier of every layer"
        (folder / "layer-map.md").write_text(layer_list.markdown(rows, title))
        (folder / "layer-map.csv").write_text(layer_list.csv_text(rows))
        totals = {ENERGY_KEY: layer_list.network_energy(rows), POWER_KEY: layer_list.network_power(rows)}
        totals = {name: value for name, value in totals.items() if value is not None}
        if totals:
            tracker.log_metrics(0, totals, check=next(iter(totals)))

    _once(cell_dir, "layers", tracker, make)


def log_profile(cfg: CellConfig, cell_dir: Path, tracker: Tracker, model) -> None:
    """With profile_layers=true: the per-layer profile of the cell's model at its training batch size."""
    if not cfg.profile_layers or not cfg.mult.simulated:
        return

    def make(folder: Path) -> None:
        batch = cfg.train.batch_size
        rows = profile.profile_model(model, batch, PROFILE_REPEATS)
        heading = profile.title(cfg.model.name, cfg.mult.spec, batch, PROFILE_REPEATS)
        profile.write(rows, heading, folder / "layer-profile.md")
        print(profile.markdown(rows, heading), flush=True)

    _once(cell_dir, "profile", tracker, make)


def log_curves(cfg: CellConfig, cell_dir: Path, tracker: Tracker, history: Sequence[Mapping]) -> None:
    """The cell's learning curves, from the per-epoch metrics it logged (trainer.State.history)."""
    if not history:
        return

    def make(folder: Path) -> None:
        title = f"{cfg.model.name} under {cfg.mult.label} on {cfg.dataset.name}, seed {cfg.seed}"
        figures.save(figures.cell_curves(title, history), folder / "learning-curves.png")

    _once(cell_dir, "curves", tracker, make)


def log_record(cfg: CellConfig, cell_dir: Path, tracker: Tracker, attempt: Mapping[str, str]) -> None:
    """The reproducibility record, made once per cell; every attempt tags the commit it runs (`attempt`: its
    run_facts tags)."""
    git = record.git_state()
    tracker.set_tags(record.tags(git, read_json(part_folder(cell_dir, "record") / record.RECORD)))
    _once(cell_dir, "record", tracker, lambda folder: record.write(cfg, folder, attempt, git))


def log_weights(cell_dir: Path, tracker: Tracker) -> None:
    """The final weights (trainer.save_final_weights wrote them into the cell's folder) as the run's weights/."""

    def make(folder: Path) -> None:
        source, target = Path(cell_dir) / FINAL_WEIGHTS, folder / FINAL_WEIGHTS
        target.unlink(missing_ok=True)
        try:
            os.link(source, target)  # the same bytes, not twice on disk
        except OSError:
            shutil.copyfile(source, target)

    _once(cell_dir, "weights", tracker, make)
