"""The reproducibility record of a cell's run: what a researcher needs to recover the code, environment and settings
behind its numbers.

    git_state()       the repository's commit, whether its tree was dirty (tracked changes or untracked files) and
                      the diff against the commit
    installed()       every installed distribution as name==version (importlib.metadata: no pip, ~0.1 s)
    write(...)        the record's files: record.json (commit, dirty, python, platform, user, command to re-run,
                      and the attempt's host, device, engine and ops build: run_facts.attempt_tags), git.diff,
                      requirements.txt, config.yaml (the resolved config, as the cell ran it)
    tags(...)         the run's tags from it: amdnn.git_commit, amdnn.git_dirty, and MLflow's own source and user
                      tags (the dashboard's Source, Version and User columns)

Made at a cell's start (orchestrator.cell.artifacts.log_record: well under a second). A resumed attempt tags its own
commit again; where it differs from the first attempt's, amdnn.git_commit_changed says so.
"""
from __future__ import annotations

import getpass
import importlib.metadata
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping

import yaml

from orchestrator.common import paths
from orchestrator.config.cell import CellConfig

RERUN = "python -m orchestrator.rerun RUN_ID  (launch.py with the run's defining config as overrides)"
RECORD = "record.json"
DIFF = "git.diff"
REQUIREMENTS = "requirements.txt"
CONFIG = "config.yaml"
GIT_TIMEOUT_S = 10.0
UNKNOWN = "unknown"


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(root: Path | None = None) -> dict[str, Any]:
    """{"commit", "dirty", "diff", "untracked"} of the repository at `root` (the code's own by default); commit
    "unknown" and dirty None where it is no git checkout or git is missing."""
    root = Path(root or paths.repo_root())
    commit = _git(root, "rev-parse", "HEAD")
    status = _git(root, "status", "--porcelain")
    if commit is None or status is None:
        return {"commit": UNKNOWN, "dirty": None, "diff": "", "untracked": []}
    untracked = [line[3:] for line in status.splitlines() if line.startswith("??")]
    return {"commit": commit.strip(), "dirty": bool(status.strip()), "diff": _git(root, "diff", "HEAD") or "",
            "untracked": untracked}


def installed() -> list[str]:
    """name==version of every distribution this interpreter sees, sorted (pip freeze's form). A .dist-info folder's
    name says both (PEP 427: name-version.dist-info), so only older .egg-info ones have their metadata parsed: on a
    busy node parsing every METADATA file costs over a second."""
    found = set()
    for distribution in importlib.metadata.distributions():
        folder = Path(str(getattr(distribution, "_path", "")))
        if folder.suffix == ".dist-info" and folder.stem.count("-") == 1:
            found.add(folder.stem.replace("-", "==").replace("_", "-"))
        elif distribution.metadata["Name"]:
            found.add(f"{distribution.metadata['Name']}=={distribution.version}")
    return sorted(found, key=str.lower)


def write(cfg: CellConfig, folder: Path, attempt: Mapping[str, str], git: Mapping[str, Any]) -> dict[str, Any]:
    """Write the record's files into `folder`; return record.json's contents."""
    folder = Path(folder)
    record = {"git_commit": git["commit"], "git_dirty": git["dirty"], "git_untracked": git["untracked"],
              "python": sys.version.split()[0], "platform": platform.platform(), "user": _user(),
              "identity": cfg.identity, "rerun": RERUN, "first_attempt": dict(attempt)}
    (folder / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    (folder / DIFF).write_text(git["diff"])
    (folder / REQUIREMENTS).write_text("\n".join(installed()) + "\n")
    (folder / CONFIG).write_text(yaml.safe_dump(cfg.as_dict(), sort_keys=False))
    return record


def tags(git: Mapping[str, Any], recorded: Mapping[str, Any] | None) -> dict[str, str]:
    """The run's tags for this attempt's code; `recorded`: record.json of the first attempt, if made."""
    out = {"amdnn.git_commit": git["commit"], "amdnn.git_dirty": str(git["dirty"]).lower(),
           "mlflow.source.name": "launch.py", "mlflow.source.type": "LOCAL", "mlflow.user": _user()}
    if git["commit"] != UNKNOWN:
        out["mlflow.source.git.commit"] = git["commit"]
    if recorded and recorded.get("git_commit") not in (None, git["commit"]):
        out["amdnn.git_commit_changed"] = f"first attempt ran {recorded['git_commit']}, this one {git['commit']}"
    return out


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (some containers)
        return UNKNOWN
