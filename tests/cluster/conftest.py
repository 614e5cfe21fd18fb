"""Fixtures of the cluster tests: a real single-node Slurm (slurm_cluster.py) for the whole session, and a sandbox per
test (checkpoints, MLflow store, grid record and Hydra output in a temporary folder)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from slurm_cluster import SlurmCluster, Unavailable  # noqa: E402


@pytest.fixture(scope="session")
def slurm():
    """A running Slurm with accounting and the Torque wrappers; skipped (failed under CI=true) when it cannot run."""
    reason = SlurmCluster.unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    cluster = SlurmCluster()
    try:
        cluster.start()
    except Unavailable as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(e))
    yield cluster
    if os.environ.get("AMDNN_KEEP_SLURM") != "1":
        cluster.stop()


@pytest.fixture
def sandbox(tmp_path):
    from cluster_helpers import Sandbox

    return Sandbox(tmp_path)
