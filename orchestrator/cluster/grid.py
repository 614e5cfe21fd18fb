"""The record of what was launched: every cell of every sweep, how to submit it again, and the jobs that ran it.

Launching writes it, the jobs append their continuations, and the status, resume and archive commands read it.
It lives in the state dir (cluster.state_dir; default $AMDNN_STATE_DIR, else <repo>/.amdnn):

    sweeps/<time>-<pid>.json   one launch: its command line, time and cells
    cells/<name>.json          one cell: identity, folders, tracking store, scheduler and executor parameters,
                               submission attempts, and every job id that ran it (launch, resume, continuation)
    cells/<name>.pkl           the submitit call that runs the cell (launcher + overrides), resubmitted as is
    grid.lock                  serialises record updates (jobs on compute nodes update records too)
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
import typing as tp
from pathlib import Path

from ops.atomic import replacing, write_bytes

from orchestrator.common import paths


def default_state_dir() -> Path:
    env = os.environ.get("AMDNN_STATE_DIR")
    return Path(env).expanduser().resolve() if env else paths.repo_root() / ".amdnn"


def state_dir_of(cluster: tp.Mapping[str, tp.Any]) -> Path:
    value = cluster.get("state_dir")
    return Path(value).expanduser().resolve() if value else default_state_dir()


class Grid:
    """The records under one state dir."""

    def __init__(self, state_dir: tp.Union[str, Path, None] = None) -> None:
        self.root = Path(state_dir).expanduser().resolve() if state_dir else default_state_dir()
        (self.root / "cells").mkdir(parents=True, exist_ok=True)
        (self.root / "sweeps").mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def locked(self, name: str = "grid.lock", blocking: bool = True) -> tp.Iterator[bool]:
        """An exclusive lock on state_dir/name (flock: released if the holder dies). Yields False if not blocking
        and someone else holds it."""
        with open(self.root / name, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _cell_path(self, name: str, suffix: str = ".json") -> Path:
        return self.root / "cells" / f"{name}{suffix}"

    def cell(self, name: str) -> tp.Optional[dict]:
        try:
            return json.loads(self._cell_path(name).read_text())
        except (OSError, ValueError):
            return None

    def cells(self) -> tp.List[dict]:
        out = []
        for path in sorted((self.root / "cells").glob("*.json")):
            try:
                out.append(json.loads(path.read_text()))
            except (OSError, ValueError):
                print(f"[amdnn] unreadable grid record {path}: skipped", file=sys.stderr)
        return out

    def save_cell(self, record: dict) -> None:
        write_bytes(self._cell_path(record["name"]), json.dumps(record, indent=1, sort_keys=True).encode())

    def update_cell(self, name: str, change: tp.Callable[[dict], None]) -> tp.Optional[dict]:
        """Read, change and write one record under the lock."""
        with self.locked():
            record = self.cell(name)
            if record is None:
                return None
            change(record)
            self.save_cell(record)
            return record

    def add_job(self, name: str, job_id: str, how: str) -> tp.Optional[dict]:
        """Record that `job_id` now runs the cell; `how`: launch, resume (both count as attempts) or continuation."""
        def change(record: dict) -> None:
            record.setdefault("jobs", []).append({"id": job_id, "how": how, "time": time.time()})
            if how != "continuation":
                record["attempts"] = record.get("attempts", 0) + 1
        return self.update_cell(name, change)

    def save_call(self, name: str, delayed: tp.Any) -> None:
        """Keep the submitit call that runs the cell (a DelayedSubmission), for resubmission by the resume cron."""
        with replacing(self._cell_path(name, ".pkl")) as tmp:
            delayed.dump(tmp)

    def load_call(self, name: str) -> tp.Any:
        # submitit only where a call is loaded: status reads the grid record without it
        from submitit.core.utils import DelayedSubmission  # pylint: disable=import-outside-toplevel

        return DelayedSubmission.load(self._cell_path(name, ".pkl"))

    def save_sweep(self, command: tp.List[str], names: tp.List[str]) -> Path:
        path = self.root / "sweeps" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
        write_bytes(path, json.dumps({"command": command, "cwd": os.getcwd(), "time": time.time(),
                                       "cells": names}, indent=1).encode())
        return path


def latest_job(record: dict) -> tp.Optional[str]:
    jobs = record.get("jobs") or []
    return jobs[-1]["id"] if jobs else None
