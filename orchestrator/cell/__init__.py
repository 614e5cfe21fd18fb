"""The life of one grid cell, from its resolved config (config.cell.CellConfig) to its last epoch:

    run          run_cell(cell) -> CellResult, request_checkpoint(): the one entry point of a job; supervises the
                 training process and retries it after a crash
    worker       `python -m orchestrator.cell.worker CELL_DIR`: the training process, its exit status the answer
    trainer      the deterministic training loop, NaN rollback (runs in the worker process)
    checkpoints  atomic, checksummed checkpoints; the newest that verifies is resumed
    collapse     an epoch back at chance loss or diverging, undone
    artifacts    what a cell logs beside its metrics: record, multiplier map, layer profile, curves, weights
    progress     a progress bar in a terminal, one line per epoch in a log
    devices      the devices a training process sees; its engine's start, GPUs or nothing, no probe noise
    energy       NVML and RAPL energy per epoch and per run; missing counters say why
    run_facts    the run's filterable tags (device, ops build, host, job id) and its dataset input
    record       the reproducibility record: commit, dirty flag and diff, installed packages, resolved config
"""

_RUN_NAMES = ("run_cell", "request_checkpoint", "checkpoint_requested", "CellResult")


def __getattr__(name):
    """`from orchestrator.cell import run_cell` as before the package (orchestrator/cell.py offered these names);
    resolved on first use, so importing a part of the package does not load run.py."""
    if name in _RUN_NAMES:
        from orchestrator.cell import run  # the package's own top part, for scripts written against the old module

        return getattr(run, name)
    raise AttributeError(f"module 'orchestrator.cell' has no attribute {name!r}")
