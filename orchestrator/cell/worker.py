"""The training process of a cell: `python -m orchestrator.cell.worker CELL_DIR`, started and watched by run_cell.

Reads CELL_DIR/run-config.json (the CellConfig resolved at launch, trusted: nothing is validated again), trains (orchestrator.cell.trainer), and says how it ended through its exit status, so
that the parent can tell a crash (retry from the last checkpoint) from an answer (done, preempted, failed):
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from pathlib import Path

from models.datasets import DatasetError

from orchestrator.cell import devices, trainer
from orchestrator.cell.checkpoints import CheckpointMismatch
from orchestrator.common import cellfiles
from orchestrator.config.cell import CellConfig
from orchestrator.config.validate import ConfigError
from orchestrator.tracking.tracker import Tracker

EXIT_FINISHED = 0
EXIT_PREEMPTED = 75      # EX_TEMPFAIL: checkpoint written on request; run the cell again to continue
EXIT_NAN = 65            # EX_DATAERR: NaN rollbacks exhausted; retrying would do the same
EXIT_REFUSED = 78        # EX_CONFIG: bad config, missing data, a checkpoint of another cell; retrying cannot help
ANSWERS = {EXIT_FINISHED: "finished", EXIT_PREEMPTED: "preempted", EXIT_NAN: "failed", EXIT_REFUSED: "failed"}
SUPERVISOR_SENDS = "AMDNN_SUPERVISOR_SENDS"  # "1": this process only queues its records, run_cell sends them


class _Stop:
    """Set from a signal handler (SIGUSR1: checkpoint requested; SIGTERM: being killed) or when the parent dies."""

    def __init__(self) -> None:
        self.requested = False
        self.parent = os.getppid()

    def __call__(self) -> bool:
        return self.requested or os.getppid() != self.parent

    def handle(self, signum, frame) -> None:  # only sets a flag: safe in a signal handler
        self.requested = True


def read_config(cell_dir: Path) -> CellConfig:
    """The cell's CellConfig, as run_cell wrote it for this launch."""
    return CellConfig.from_json((Path(cell_dir) / cellfiles.RUN_CONFIG).read_text())


def _tracker(cfg: CellConfig, cell_dir: Path) -> Tracker:
    tracker = Tracker(cfg.tracking.uri, cfg.tracking.experiment, cfg.identity, cell_dir, run_name=cfg.name,
                      mode=cfg.tracking.mode)
    if os.environ.get(SUPERVISOR_SENDS) == "1":
        tracker.only_queue()
    return tracker


def run(cell_dir: Path, should_stop, tracker=None, cfg: CellConfig | None = None) -> int:
    """Train the cell in CELL_DIR in this process; return the exit status (EXIT_*). Never raises for a failure of
    the cell itself. `tracker`: the caller's, when it runs the cell in its own process; `cfg`: its config, when the
    caller has read it already."""
    cell_dir = Path(cell_dir)
    cfg = cfg or read_config(cell_dir)
    tracker = tracker or _tracker(cfg, cell_dir)
    # Any other exception, a ValueError included, is a crash: main() exits 1 and run_cell retries the cell from its
    # last good checkpoint (bounded by retries.crashes). Only a config error is refused for good.
    try:
        outcome = trainer.train(cfg, cfg.identity, cell_dir, tracker, should_stop)
    except trainer.NanRollbacksExhausted as e:
        return _failed(tracker, cell_dir, e, EXIT_NAN)
    except (CheckpointMismatch, DatasetError, ConfigError) as e:  # retrying cannot fix these: say so and stop
        return _failed(tracker, cell_dir, e, EXIT_REFUSED)
    finally:
        tracker.close()  # a send under way finishes (bounded by MLflow's timeouts); the rest stays queued
    if outcome.status == "preempted":
        cellfiles.event(cell_dir, "preempted", global_step=outcome.state.global_step, epoch=outcome.state.epoch + 1,
                        step_in_epoch=outcome.state.step_in_epoch)  # where it stopped, as the launcher says it
        return EXIT_PREEMPTED  # run_cell sends what is queued
    tracker.end("FINISHED")
    cellfiles.write_json(cell_dir / cellfiles.DONE, {
        "identity": cfg.identity, "name": cfg.name, "test_accuracy": outcome.test_accuracy,
        "global_step": outcome.state.global_step, "epochs": len(outcome.state.history),
        "history": outcome.state.history})
    cellfiles.event(cell_dir, "finished", test_accuracy=outcome.test_accuracy)
    return EXIT_FINISHED


def _failed(tracker, cell_dir, error: BaseException, code: int) -> int:
    message = f"{type(error).__name__}: {error}"
    print(f"[amdnn] cell failed: {message}", file=sys.stderr, flush=True)
    cellfiles.event(cell_dir, "failed", error=message[:2000])
    tracker.set_tags({"amdnn.error": message[:4000]})
    tracker.end("FAILED")
    return code  # run_cell sends what is queued


def _refused(cfg: CellConfig, cell_dir: Path, error: BaseException) -> int:
    """Refuse the cell in CELL_DIR before it trains: its run is marked FAILED with the reason."""
    tracker = _tracker(cfg, cell_dir)
    try:
        return _failed(tracker, cell_dir, error, EXIT_REFUSED)
    finally:
        tracker.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m orchestrator.cell.worker CELL_DIR  (started by orchestrator.cell.run.run_cell)",
              file=sys.stderr)
        return 2
    stop = _Stop()
    # Checkpoint requested (SIGUSR1, from run_cell), being terminated (SIGTERM: scheduler, kill) or interrupted
    # (SIGINT: Ctrl-C reaches the whole process group): save at the next step and leave.
    for signum in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop.handle)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        cell = read_config(Path(argv[0]))
        try:  # selects Keras' backend first, before anything imports Keras
            devices.start_engine(cell.engine, cell.gpus)
        except devices.GpusMissing as e:  # never a CPU run in place of the GPUs asked for; a retry here cannot help
            return _refused(cell, Path(argv[0]), e)
        return run(Path(argv[0]), stop, cfg=cell)
    except Exception:  # an unexpected error is a crash: the parent retries from the last checkpoint (bounded)
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main())
