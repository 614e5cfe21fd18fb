"""A cell's durable queue of tracking records, the register of the queues that feed one SQLite store, and the locks of
those who send them.

    CELL_DIR/tracking-queue.jsonl   one JSON record a line: appended and fsynced by the cell's process, never rewritten
                                    by any other process (so an importer may read it while it grows)
    CELL_DIR/tracking-queue.sent    {"offset": N} (fixed width): the records before byte N are in the store
    CELL_DIR/tracking-queue.lock    flock held by whoever sends this queue now (the cell itself, or an importer)
    <db>.queues/<identity>.json     the register: a cell whose records an importer brings into the SQLite file <db>
    <db>.writer.lock                flock held by the one process writing <db> in single-writer mode

Sending is idempotent (orchestrator.tracking.writer), so a sender killed between writing the store and moving the
offset sends the same records again and nothing is logged twice. The offset file is overwritten in place and not
fsynced: losing it to a power cut only means sending again. Only the cell's own process, the one appender, may
empty a fully sent queue (compact), and it makes the offset 0 durable before it truncates.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from pathlib import Path
from typing import Iterator

from ops.atomic import write_bytes

from orchestrator.common.cellfiles import QUEUE, QUEUE_LOCK, QUEUE_SENT

log = logging.getLogger(__name__)


@contextlib.contextmanager
def flocked(path: Path, timeout_s: float | None = None, required: bool = True) -> Iterator[bool]:
    """An exclusive flock on `path` (released if the holder dies): waits forever (None) or up to `timeout_s` (0: one
    try); yields whether it was obtained. A filesystem without flock (an NFS mount without its lock service) raises,
    unless not `required`: then the caller goes on unlocked, as it would have without the lock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:  # type: ignore[operator]
                    yield False
                    return
                time.sleep(0.05)
            except OSError as e:
                if required:
                    raise OSError(e.errno, f"cannot lock {path} ({e.strerror}): its filesystem has no working flock; "
                                           f"see docs/tracking.md") from e
                log.warning("cannot lock %s (%s): going on without the lock", path, e.strerror)
                yield True
                return
        try:
            yield True
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _offset_text(offset: int) -> bytes:
    return json.dumps({"offset": offset}).encode().ljust(OFFSET_WIDTH)


OFFSET_WIDTH = 40   # bytes of the offset file: {"offset": N} padded with spaces, N up to 10^28


class CellQueue:
    """The queue files of one cell folder."""

    def __init__(self, cell_dir: Path):
        self.cell_dir = Path(cell_dir)
        self.path = self.cell_dir / QUEUE
        self.sent_path = self.cell_dir / QUEUE_SENT
        self.lock_path = self.cell_dir / QUEUE_LOCK

    def append(self, record: dict) -> None:
        """Append one record, durably (fsync) before returning."""
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        self.cell_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a crash mid-append left half a line: end it there
                line = b"\n" + line
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def sent_offset(self) -> int:
        try:
            return max(0, int(json.loads(self.sent_path.read_text())["offset"]))
        except (OSError, ValueError, KeyError, TypeError):
            return 0

    def unsent(self) -> tuple[list[dict], int]:
        """The records after the sent offset, up to the last complete line (a line still being appended waits for the
        next call), and the offset just after them. A torn line (its writer crashed mid-append) is dropped: the
        training it describes was not checkpointed, so it is redone and queued again."""
        start = self.sent_offset()
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if start > size:  # a queue restored from the archive beside a newer offset: send it all again
                    start = 0
                f.seek(start)
                data = f.read(size - start)
        except FileNotFoundError:
            return [], 0
        end = data.rfind(b"\n") + 1
        records = []
        for line in data[:end].splitlines():
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                log.warning("tracking queue %s: dropping a torn line", self.path)
        return records, start + end

    def waiting(self) -> int:
        """How many complete records are not in the store yet."""
        return len(self.unsent()[0])

    def mark_sent(self, offset: int) -> None:
        """Overwrite the offset in place: one write of a fixed width (no new file, no rename: an import of 1000
        cells writes 1000 of these), which a reader sees whole or, torn by a crash, as unreadable, meaning 0."""
        fd = os.open(self.sent_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, _offset_text(offset), 0)
        finally:
            os.close(fd)

    def compact(self, offset: int) -> None:
        """After sending up to `offset`: empty the queue if that was all of it, else move the offset. Only for the
        cell's own process (the one appender), holding the queue's lock."""
        if not self.path.exists() or self.path.stat().st_size != offset:
            self.mark_sent(offset)
            return
        write_bytes(self.sent_path, _offset_text(0))  # durable first: a crash here resends all
        os.truncate(self.path, 0)

    def sending(self, timeout_s: float | None = None):
        """The queue's lock: held by whoever sends it (see flocked). Only guards against a second sender of one cell
        (a mode changed while a job ran), so a filesystem without flock does not stop the sending."""
        return flocked(self.lock_path, timeout_s, required=False)


# -- the register of one SQLite store's queues ---------------------------------------------------------------------
def register_dir(db: Path) -> Path:
    return db.with_name(db.name + ".queues")


def writer_lock_path(db: Path) -> Path:
    return db.with_name(db.name + ".writer.lock")


def register(db: Path, identity: str, cell_dir: Path, experiment: str, run_name: str | None) -> None:
    """Enter a cell's queue in the store's register (once: a file that exists is left alone)."""
    path = register_dir(db) / f"{identity}.json"
    if not path.exists():
        write_bytes(path, json.dumps({"identity": identity, "cell_dir": str(cell_dir), "experiment": experiment,
                                      "run_name": run_name}, sort_keys=True).encode())


def registered(db: Path) -> list[dict]:
    """Every cell entered in the store's register."""
    out = []
    folder = register_dir(db)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            log.warning("unreadable entry %s of the tracking register: skipped", path)
    return out
