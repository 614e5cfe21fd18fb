"""Where things live by default: the repository's data/, checkpoints/ and mlflow.db, found from this file.

Config keys left null (data_dir, checkpoint_root, tracking_uri) resolve here, in Python rather than through an
OmegaConf resolver, so a pickled config means the same thing in a Slurm or PBS job as on the login node.
"""
from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The repository (or installed tree) that holds this package."""
    return Path(__file__).resolve().parents[2]  # orchestrator/common/paths.py


def data_dir(value: str | None) -> Path:
    return Path(value).expanduser().resolve() if value else repo_root() / "data"


def checkpoint_root(value: str | None) -> Path:
    return Path(value).expanduser().resolve() if value else repo_root() / "checkpoints"


def tracking_uri(value: str | None) -> str:
    """The MLflow URI: the configured one, else $MLFLOW_TRACKING_URI, else an absolute SQLite file in the repo.

    A relative sqlite path is made absolute against the launch directory so that every process of a sweep (and
    every cluster job, whatever its cwd) writes the same store.
    """
    uri = value or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{repo_root() / 'mlflow.db'}"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = f"sqlite:///{Path(uri[len('sqlite:///'):]).expanduser().resolve()}"
    return uri


def sqlite_path(uri: str) -> Path | None:
    """The database file of a sqlite:/// URI, or None for any other store."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def artifact_location(uri: str) -> str | None:
    """Where a new experiment of the store `uri` keeps its artifacts: `mlruns/` beside an SQLite file (MLflow's
    default is ./mlruns under the working folder of whichever process creates the experiment: a job's, the cron's,
    a test's), None (the server's choice) for other stores."""
    db = sqlite_path(uri)
    return str(db.parent / "mlruns") if db is not None else None
