"""Helpers (imported by name) of the dashboard tests: launch.py as a user runs it, into a folder of its own, and the
store of a finished grid."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Two cells of LeNet-300-100 on the bundled digits, 2 epochs each, with MLflow's system metrics on.
GRID = ["-m", "model=lenet300", "mult=native,am16", "train.epochs=2", "train.batch_size=32", "system_metrics=true"]


def launch_env() -> dict:
    """The environment a user launches from: the repository importable, and no TF logging setting of our own."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def launch(root: Path, *args: str, **kw) -> subprocess.Popen | subprocess.CompletedProcess:
    """launch.py with checkpoints, store and Hydra output under `root`; Popen when popen=True."""
    command = [sys.executable, str(REPO / "launch.py"), *args, f"checkpoint_root={root / 'ck'}",
               f"tracking_uri=sqlite:///{root / 'mlflow.db'}", f"hydra.sweep.dir={root / 'sweep'}",
               f"hydra.run.dir={root / 'run'}"]
    if kw.pop("popen", False):
        return subprocess.Popen(command, cwd=root, env=launch_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, **kw)
    return subprocess.run(command, cwd=root, env=launch_env(), capture_output=True, text=True, timeout=600, **kw)


@dataclass
class FinishedGrid:
    root: Path
    uri: str
    output: str          # what the sweep printed (stdout and stderr)

    def client(self):
        from mlflow.tracking import MlflowClient

        return MlflowClient(self.uri)

    def runs(self) -> list:
        """The cells' runs (a report run the tests add is not one)."""
        client = self.client()
        exp = client.get_experiment_by_name("amdnn")
        return [r for r in client.search_runs([exp.experiment_id], max_results=100) if "amdnn.cell" in r.data.tags]
