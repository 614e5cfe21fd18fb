"""Archiving: copy cells' checkpoints and results to the archive path (cluster.archive_dir; on Gadi the project's
gdata, since scratch is purged after 90 days), at the end of a cell and every cluster.archive_every_min while it
runs; and copy them back when a cell's scratch folder has gone.

    python -m orchestrator.cluster.archive [--state-dir DIR]      archive every finished cell of the grid now

The archive holds <archive_dir>/<cell name>/ (the cell folder: checkpoints, done.json, events) and, for a SQLite
tracking store, <archive_dir>/mlflow.db (a consistent copy made with SQLite's backup API).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import threading
import typing as tp
from pathlib import Path

from ops.atomic import replacing

from orchestrator.cluster.grid import Grid
from orchestrator.cluster.status import done_info
from orchestrator.common import cellfiles, paths

# Never copied: the locks belong to the process running the cell; temporaries are half-written by definition.
_SKIP = (cellfiles.LOCK, cellfiles.QUEUE_LOCK)


def _skip(name: str) -> bool:
    return name in _SKIP or ".tmp" in name


def sync_tree(src: Path, dst: Path, restore: bool = False) -> int:
    """Copy new or changed files of src into dst (each atomically, ops/atomic.py); files that vanished from src (old
    checkpoints pruned) are removed from dst. Returns the number of files copied.

    restore=True (archive -> scratch): only files dst lacks are copied and nothing is removed, so that whatever the
    cell wrote since (events, records not yet sent to MLflow) is kept."""
    copied = 0
    dst.mkdir(parents=True, exist_ok=True)
    seen = set()
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        for name in files:
            if _skip(name):
                continue
            s, d = Path(root) / name, dst / rel / name
            seen.add(rel / name)
            try:
                st = s.stat()
            except FileNotFoundError:
                continue  # pruned while we walked
            if d.exists() and (restore or d.stat().st_size == st.st_size and int(d.stat().st_mtime) == int(st.st_mtime)):
                continue
            try:
                with replacing(d) as tmp:
                    shutil.copy2(s, tmp)
            except FileNotFoundError:
                continue  # pruned since the walk saw it
            copied += 1
    if restore:
        return copied
    for root, _dirs, files in os.walk(dst):
        rel = Path(root).relative_to(dst)
        for name in files:
            if rel / name not in seen and not _skip(name):
                (Path(root) / name).unlink(missing_ok=True)
    return copied


def archive_tracking(uri: str, archive_dir: Path) -> tp.Optional[Path]:
    """A consistent copy of a SQLite tracking store into the archive (other stores are servers: nothing to copy)."""
    db = paths.sqlite_path(uri)
    if db is None or not db.exists():
        return None
    target = Path(archive_dir) / "mlflow.db"
    with replacing(target) as tmp:
        src = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        try:
            dst = sqlite3.connect(tmp)
            with dst:
                src.backup(dst)
            dst.close()
        finally:
            src.close()
    return target


def archive_cell(cell_dir: tp.Union[str, Path], archive_dir: tp.Union[str, Path], uri: tp.Optional[str] = None) -> Path:
    cell_dir, archive_dir = Path(cell_dir), Path(archive_dir)
    dst = archive_dir / cell_dir.name
    sync_tree(cell_dir, dst)
    if uri:
        archive_tracking(uri, archive_dir)
    return dst


def restore_cell(cell_dir: tp.Union[str, Path], archive_dir: tp.Union[str, Path]) -> bool:
    """If the cell's folder lost its checkpoints (scratch purged) and the archive has them, copy them back."""
    cell_dir, src = Path(cell_dir), Path(archive_dir) / Path(cell_dir).name
    if not src.is_dir() or (cell_dir / "checkpoints").is_dir() and any((cell_dir / "checkpoints").iterdir()):
        return False
    sync_tree(src, cell_dir, restore=True)
    return True


class Periodic:
    """Inside a job: archive the cell every `every_min` minutes in a daemon thread, and once more at stop()."""

    def __init__(self, cell_dir: Path, archive_dir: Path, every_min: float, uri: tp.Optional[str] = None) -> None:
        self.args = (cell_dir, archive_dir, uri)
        self.every_s = max(1.0, float(every_min) * 60)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="amdnn-archive", daemon=True)

    def start(self) -> "Periodic":
        self._thread.start()
        return self

    def _once(self) -> None:
        try:
            archive_cell(*self.args)
        except Exception as e:  # noqa: BLE001 - archiving must never kill training; the next round retries
            print(f"[amdnn] archiving {self.args[0]} to {self.args[1]} failed: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._once()

    def stop(self) -> None:
        self._stop.set()
        self._once()


def main(argv: tp.Optional[tp.List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="archive every finished cell of the grid")
    parser.add_argument("--state-dir", help="the grid record (default: $AMDNN_STATE_DIR, else <repo>/.amdnn)")
    args = parser.parse_args(argv)
    n = 0
    for record in Grid(args.state_dir).cells():
        if record.get("archive_dir") and Path(record["cell_dir"]).is_dir() and done_info(record):
            print(f"{record['name']} -> {archive_cell(record['cell_dir'], record['archive_dir'], record['tracking_uri'])}")
            n += 1
    print(f"{n} finished cell(s) archived")
    return 0


if __name__ == "__main__":
    sys.exit(main())
