"""Fixtures of the dashboard tests: one small grid finished by a real local sweep (`launch.py -m`, real training,
real SQLite MLflow store), shared by the tests of this folder (helpers in tests/dashboard/helpers.py)."""
from __future__ import annotations

import pytest

from tests.dashboard.helpers import GRID, FinishedGrid, launch


@pytest.fixture(scope="session")
def finished_grid(tmp_path_factory) -> FinishedGrid:
    root = tmp_path_factory.mktemp("grid")
    proc = launch(root, *GRID)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return FinishedGrid(root, f"sqlite:///{root / 'mlflow.db'}", output)
