"""One cell of a parallel local sweep in a process of its own: `python -m orchestrator.sweep.cell_process JOB_FILE`.

The local launcher (sweep/local_launcher) writes JOB_FILE (cloudpickle: the sweep's config, Hydra's config loader and
state, the task function, the cell's overrides, job number and output folder, the GPUs it gets) and starts this with
CUDA_VISIBLE_DEVICES set to the cell's GPUs, before any framework is imported. Here the cell runs as Hydra's basic
launcher would run it (run_job: the job's output folder and logs, launch.py's task function, run_cell), with
cluster.gpus set to the GPUs the cell got, so that the cell checks they are there. Hydra's callbacks stay in the
launching process (the sweep's progress line is its own). What happened goes to JOB_FILE's result file, as JSON:

    {"status": "completed" | "failed" | "stopped", "return_value": launch_cell's dict, "error": ...,
     "where": where a stopped cell stopped (cell/stopping),
     "cuda_visible_devices": what this process was given, "pid": ..., "started": ..., "ended": ... (time.time())}

Ctrl-C (the launcher sends SIGINT to this process's group, as a terminal does) or SIGTERM stops the cell at a
checkpoint through run_cell; so does the death of the launcher, which this process watches.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from orchestrator.common import cellfiles

EXIT_STOPPED = 130


def write_job(path: Path, **job: Any) -> None:
    """The JOB_FILE of one cell (keys: config, config_loader, singleton_state, task_function, overrides, idx,
    sweep_dir, subdir, gpus, result)."""
    import cloudpickle  # a dependency of submitit; pickles launch.py's task function, which lives in __main__

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cloudpickle.dumps(job))


def _watch_parent(parent: int) -> None:
    """A launcher killed outright (no Ctrl-C to forward) leaves no cell running: stop this one at a checkpoint."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGINT)


def _terminated(signum, frame) -> None:
    raise SystemExit(128 + signum)  # as run_cell's own handler: the cell checkpoints, and this process says so


def _run(job: dict) -> Any:
    # Hydra's internals only in the cell's own process, loaded once its environment (CUDA_VISIBLE_DEVICES) is set
    from hydra._internal.callbacks import Callbacks
    from hydra.core.singleton import Singleton
    from hydra.core.utils import run_job, setup_globals
    from hydra.types import HydraContext
    from omegaconf import open_dict

    Singleton.set_state(job["singleton_state"])
    setup_globals()
    config = job["config_loader"].load_sweep_config(job["config"], list(job["overrides"]))
    with open_dict(config):
        config.hydra.job.id = job["idx"]
        config.hydra.job.num = job["idx"]
        config.hydra.sweep.dir = job["sweep_dir"]   # as the launcher resolved them: its `now` is not this one's
        config.hydra.sweep.subdir = job["subdir"]
        config.cluster.gpus = job["gpus"]
    return run_job(hydra_context=HydraContext(config_loader=job["config_loader"], callbacks=Callbacks()),
                   task_function=job["task_function"], config=config, job_dir_key="hydra.sweep.dir",
                   job_subdir_key="hydra.sweep.subdir")


def main(argv: list[str] | None = None) -> int:
    import pickle  # the job file: read here, in the cell's process, and nowhere else

    from hydra.core.utils import JobStatus  # as _run: Hydra's internals only in the cell's process

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m orchestrator.sweep.cell_process JOB_FILE  (started by a parallel local sweep)",
              file=sys.stderr)
        return 2
    job = pickle.loads(Path(argv[0]).read_bytes())
    signal.signal(signal.SIGTERM, _terminated)  # also outside run_cell's training (starting, flushing records)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), name="amdnn-parent-watch", daemon=True).start()
    outcome: dict[str, Any] = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(),
                               "started": time.time()}
    code = 0
    try:
        ret = _run(job)
        if ret.status == JobStatus.COMPLETED:
            outcome.update(status="completed", return_value=ret.return_value)
        else:
            error = ret._return_value  # the task's exception; reading return_value would raise it
            outcome.update(status="failed", error="".join(traceback.format_exception_only(type(error), error)))
            code = 1
    except (KeyboardInterrupt, SystemExit) as stop:  # Ctrl-C, or SIGTERM through run_cell: it has checkpointed
        outcome.update(status="stopped", error=f"stopped ({type(stop).__name__})",
                       where=getattr(stop, "where", None))  # run_cell's CellStopped says where
        code = EXIT_STOPPED
    except Exception:  # noqa: BLE001 - told to the launcher, which goes on with the other cells
        outcome.update(status="failed", error=traceback.format_exc())
        traceback.print_exc()
        code = 1
    outcome["ended"] = time.time()
    cellfiles.write_json(Path(job["result"]), outcome)
    return code


if __name__ == "__main__":
    sys.exit(main())
