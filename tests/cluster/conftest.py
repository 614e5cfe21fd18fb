"""Fixtures of the cluster tests: a real single-node Slurm (slurm_cluster.py) for the whole session, and a sandbox per
test (checkpoints, MLflow store, grid record and Hydra output in a temporary folder)."""
from __future__ import annotations

import os

import pytest

from tests.cluster import slurm_cluster
from tests.cluster.helpers import Sandbox


def _not_here(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm():
    """A running Slurm with accounting and the Torque wrappers; skipped (failed under CI=true) when it cannot run.

    The private cluster's slurm.conf is exported as SLURM_CONF for the whole session: every command the product runs
    (sbatch, squeue, sacct, scancel, scontrol, qsub, qstat, qdel) and every job it submits inherits it.
    """
    cluster = slurm_cluster.cluster()
    reason = cluster.unavailable_reason()
    if reason:
        _not_here(reason)
    try:
        cluster.start()
    except slurm_cluster.Unavailable as e:
        _not_here(str(e))
    before = os.environ.get("SLURM_CONF")
    if cluster.conf is not None:
        os.environ["SLURM_CONF"] = str(cluster.conf)
    yield cluster
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before
    if os.environ.get("AMDNN_KEEP_SLURM") != "1":
        cluster.stop()


@pytest.fixture
def sandbox(tmp_path):
    return Sandbox(tmp_path)
