"""Fixtures of the dashboard tests: one small grid finished by a real local sweep (`launch.py -m`, real training,
real SQLite MLflow store), shared by the tests of this folder (helpers in dashboard_helpers.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dashboard_helpers, whatever pytest's import mode

from dashboard_helpers import GRID, FinishedGrid, launch  # noqa: E402


@pytest.fixture(scope="session")
def finished_grid(tmp_path_factory) -> FinishedGrid:
    root = tmp_path_factory.mktemp("grid")
    proc = launch(root, *GRID)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return FinishedGrid(root, f"sqlite:///{root / 'mlflow.db'}", output)
