"""ops/atomic.py, the project's one atomic file replacement: whole old or whole new, no temporaries left behind."""

from __future__ import annotations

import os
import threading

import pytest

from ops.atomic import replacing, write_bytes


def test_write_bytes_replaces_the_file_with_open_permissions(tmp_path):
    path = tmp_path / "sub" / "f.bin"
    write_bytes(path, b"old")
    write_bytes(path, b"new contents")
    assert path.read_bytes() == b"new contents"
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.bin"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0600: data other jobs and users read


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "f.json"
    write_bytes(path, b"{}")
    with pytest.raises(RuntimeError, match="checksum"):
        with replacing(path) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("checksum mismatch")
    assert path.read_bytes() == b"{}"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_concurrent_writers_never_mix(tmp_path):
    path = tmp_path / "shared.bin"
    payloads = [bytes([i]) * 100_000 for i in range(8)]
    threads = [threading.Thread(target=lambda p=p: [write_bytes(path, p) for _ in range(20)]) for p in payloads]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert path.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["shared.bin"]
