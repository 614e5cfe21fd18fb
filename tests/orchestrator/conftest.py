"""Fixtures of the orchestrator tests (helpers that tests import live in tests/orchestrator/helpers.py)."""
import pytest

from tests.orchestrator.helpers import Workdir


@pytest.fixture
def workdir(tmp_path):
    return Workdir(tmp_path)
