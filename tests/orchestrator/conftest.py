"""Fixtures of the orchestrator tests (helpers live in orch_helpers.py)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # orch_helpers, whatever pytest's import mode

from orch_helpers import Workdir  # noqa: E402


@pytest.fixture
def workdir(tmp_path):
    return Workdir(tmp_path)
