"""Replacing a file atomically: a reader sees the old file or the whole new one, never a part, even after a crash.

The project's one helper for it (ops is the bottom of launch -> orchestrator -> models -> ops, so every layer can use
it): the new content goes to a temporary file beside the target (same file system, so the rename is atomic), which is
fsynced, renamed over the target, and the folder is fsynced so that the rename itself survives a power loss. Temporary
names start with "." and contain ".tmp" (what the archiver skips) and are unique per call, so two threads or processes
writing one file never share one. Files get the permissions of open() (the umask), unlike tempfile.mkstemp's 0600.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make the entries of `folder` (a rename into it) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """A fresh temporary path beside `path` for the caller to create; on leaving the block it is fsynced and renamed
    over `path`. If the block raises (a failed check, an interrupted copy) it is removed and `path` is untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        with open(tmp, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` by a file holding `data`, atomically."""
    with replacing(path) as tmp, open(tmp, "xb") as handle:
        handle.write(data)
