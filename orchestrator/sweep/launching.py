"""What launch.py does with one composed config, under any Hydra launcher (basic, submitit, PBS).

A single run refuses an invalid config with one message and exit status 2 (EXIT_CONFIG), and exits 1 on a failed
cell; in a sweep every cell's outcome, failure included, is recorded and returned so that one bad cell does not stop
the others. A single run with a cluster preset (cluster=slurm, pbs, gadi) never trains here, where it would be the
login node: it becomes the same command with -m, a sweep of one cell that the cluster launcher submits.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import sys
import traceback
from pathlib import Path
from typing import Mapping, NoReturn, Sequence

from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from orchestrator.cell.run import CellResult, run_cell
from orchestrator.common import paths
from orchestrator.config.cell import CellConfig, resolve
from orchestrator.config.keys import override_errors
from orchestrator.config.validate import ConfigError, config_error
from orchestrator.tracking.dashboard import run_url, ui_base
from orchestrator.tracking.server_access import server_problem

log = logging.getLogger(__name__)
RESULT_FILE = "cell-result.json"   # in the Hydra job's output dir: what this job did
EXIT_CONFIG = 2                    # an invalid config: nothing was trained or submitted (as a sweep refused: callbacks)
SWEEP_OF_ONE = "AMDNN_SWEEP_OF_ONE"  # set when a single run re-executes itself with -m: it must not do so again


def refuse(error: ConfigError) -> NoReturn:
    """Print a config error as one message, no traceback, and exit EXIT_CONFIG."""
    print(f"[amdnn] {error}\n[amdnn] nothing was trained or submitted", file=sys.stderr, flush=True)
    sys.exit(EXIT_CONFIG)


def check_command_line(argv: Sequence[str]) -> None:
    """Before Hydra composes: refuse an override of a key that conf/ does not define, or an option a group does not
    have, naming the closest valid one (for a misspelt key Hydra's own message would suggest `+key=value`, which
    composes the typo)."""
    if "--version" in argv:
        return
    try:
        args, _ = get_args_parser().parse_known_args(list(argv))
    except SystemExit:  # a malformed command line: Hydra says what is wrong
        return
    errors = override_errors(args.overrides)
    if errors:
        refuse(config_error(errors))


def _launch_script() -> Path:
    return paths.repo_root() / "launch.py"


def _submit_as_sweep_of_one(cell: CellConfig) -> NoReturn:
    """A single run on a cluster preset: re-execute the command with -m, so that the cluster launcher submits the
    cell; or, where this process is not launch.py's (or already is that re-execution), refuse with the command."""
    args = sys.argv[1:]
    shown = f"python {shlex.join([sys.argv[0], '-m', *args])}"
    cluster = cell.cluster.get("name", cell.cluster["scheduler"])
    ran_launch_py = Path(sys.argv[0]).resolve() == _launch_script().resolve()
    if os.environ.get(SWEEP_OF_ONE) or not ran_launch_py:
        print(f"[amdnn] cluster={cluster} submits jobs, which only a sweep does; nothing was trained or submitted. "
              f"Run:\n    {shown}", file=sys.stderr, flush=True)
        sys.exit(EXIT_CONFIG)
    print(f"[amdnn] cluster={cluster} submits jobs and trains nothing here: submitting this cell as a sweep of one, "
          f"as `{shown}` does", flush=True)
    os.environ[SWEEP_OF_ONE] = "1"
    os.execv(sys.executable, [sys.executable, str(_launch_script()), "-m", *args])


def resume_hint() -> str:
    """After Ctrl-C or SIGTERM: the command that finishes what did not finish, which is the same command, run from
    the same folder (a cell's identity comes from its configuration: finished cells are not trained again)."""
    command = shlex.join(["python3", *sys.argv])
    return (f"[amdnn] stopped; every cell keeps its checkpoints. Resume with the same command, from {os.getcwd()}:\n"
            f"    {command}")


def mlflow_ui_command(uri: str) -> str:
    """The exact command that opens MLflow's UI on `uri` (or where to point a browser for a server)."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser (MLflow tracking server)"
    exe = Path(sys.executable).with_name("mlflow")
    return f"{exe if exe.exists() else shutil.which('mlflow') or 'mlflow'} ui --backend-store-uri {uri}"


def _hydra_context() -> tuple[bool, Path | None]:
    try:
        hc = HydraConfig.get()
        return hc.mode == RunMode.MULTIRUN, Path(hc.runtime.output_dir)
    except Exception:  # noqa: BLE001 - called outside Hydra (tests, scripts)
        return False, None


def launch_cell(cfg, cell: CellConfig | None = None, tags: Mapping[str, str] | None = None) -> dict:
    """Run one cell from a composed config, resolved here once, or from `cell`, resolved at launch (a cluster job's:
    trusted, `cfg` then unread), with more `tags` for its run (run_cell's); print its outcome; return
    CellResult.to_dict()."""
    multirun, output_dir = _hydra_context()
    try:
        if cell is None:
            cell = resolve(cfg)
            refused = None if multirun else server_problem(cell.tracking.uri)  # a sweep's callbacks checked it
            if refused:
                raise ConfigError(refused)
            if not multirun and cell.cluster.get("scheduler"):
                _submit_as_sweep_of_one(cell)
        result = run_cell(cell, tags=tags)
    except ConfigError as e:
        if not multirun:
            refuse(e)
        result = CellResult(identity="", name="invalid", cell_dir="", status="failed",
                            error=traceback.format_exc(limit=0).strip())
    except Exception:  # noqa: BLE001 - in a sweep one crashed cell is recorded, the sweep goes on
        if not multirun:
            raise
        log.exception("cell failed")
        result = CellResult(identity="", name="error", cell_dir="", status="failed", error=traceback.format_exc())
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / RESULT_FILE).write_text(json.dumps(result.to_dict(), indent=1))
    uri = cell.tracking.uri if cell is not None else paths.tracking_uri(cfg.get("tracking_uri"))  # an invalid cell's
    accuracy = "-" if result.test_accuracy is None else f"{result.test_accuracy:.4f}"
    what = "already finished, nothing trained" if result.skipped else result.status
    print(f"[amdnn] {result.name}: {what}; final test accuracy {accuracy}" +
          (f"; error: {result.error.strip().splitlines()[-1]}" if result.error else ""), flush=True)
    if not multirun:
        if result.run_id is None:  # only queued (tracking_mode=queue or single_writer): the importer sends it
            print(f"[amdnn] records queued in {result.cell_dir}; into {uri} with: python -m "
                  f"orchestrator.tracking.importer --tracking-uri {uri}", flush=True)
        else:
            print(f"[amdnn] MLflow run {result.run_id} in {uri}\n[amdnn] see it with: {mlflow_ui_command(uri)}, "
                  f"at {run_url(ui_base(uri), result.run_id)}", flush=True)
        if result.status not in ("finished", "preempted"):
            sys.exit(1)
    return result.to_dict()
