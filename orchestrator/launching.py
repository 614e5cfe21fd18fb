"""What launch.py does with one composed config, under any Hydra launcher (basic, submitit, PBS).

A single run raises on an invalid config and exits non-zero on a failed cell; in a sweep every cell's outcome,
failure included, is recorded and returned so that one bad cell does not stop the others.
"""
from __future__ import annotations

import json
import logging
import shutil
import sys
import traceback
from pathlib import Path

from . import paths
from .cell import CellResult, run_cell
from .config import ConfigError, to_dict

log = logging.getLogger(__name__)
RESULT_FILE = "cell-result.json"   # in the Hydra job's output dir: what this job did


def mlflow_ui_command(uri: str) -> str:
    """The exact command that opens MLflow's UI on `uri` (or where to point a browser for a server)."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser (MLflow tracking server)"
    exe = Path(sys.executable).with_name("mlflow")
    return f"{exe if exe.exists() else shutil.which('mlflow') or 'mlflow'} ui --backend-store-uri {uri}"


def _hydra_context() -> tuple[bool, Path | None]:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
        return hc.mode == RunMode.MULTIRUN, Path(hc.runtime.output_dir)
    except Exception:  # noqa: BLE001 - called outside Hydra (tests, scripts)
        return False, None


def launch_cell(cfg) -> dict:
    """Run one cell from a composed config; print its outcome; return CellResult.to_dict()."""
    multirun, output_dir = _hydra_context()
    c = to_dict(cfg)
    try:
        result = run_cell(cfg)
    except ConfigError:
        if not multirun:
            raise
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
    uri = paths.tracking_uri(c.get("tracking_uri"))
    accuracy = "-" if result.test_accuracy is None else f"{result.test_accuracy:.4f}"
    what = "already finished, nothing trained" if result.skipped else result.status
    print(f"[amdnn] {result.name}: {what}; final test accuracy {accuracy}" +
          (f"; error: {result.error.strip().splitlines()[-1]}" if result.error else ""), flush=True)
    if not multirun:
        print(f"[amdnn] MLflow run {result.run_id} in {uri}\n[amdnn] see it with: {mlflow_ui_command(uri)}", flush=True)
        if result.status not in ("finished", "preempted"):
            sys.exit(1)
    return result.to_dict()
