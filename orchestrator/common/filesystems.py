"""Which filesystem a path lies on, by its statfs type: enough to tell a network filesystem from a local one.

    filesystem_type("/scratch/ab12/mlflow.db")  -> "lustre"
    is_network("nfs") -> True

SQLite's locking is unreliable on network filesystems (https://www.sqlite.org/lockingv3.html, section 6), which is
why the tracking store changes how it is written there (orchestrator.tracking.mode). The type comes from statfs(2)'s
f_type (the filesystem's magic number, linux/magic.h and each filesystem's own header), read through libc; a path
that does not exist yet is judged by its nearest existing parent, where it will be created.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from pathlib import Path

# statfs f_type -> name. The network (shared) ones first; the local ones name the type in messages.
NETWORK_TYPES = {
    0x6969: "nfs",
    0x0BD00BD0: "lustre",
    0x47504653: "gpfs",          # IBM Spectrum Scale
    0xFF534D42: "cifs",
    0xFE534D42: "smb2",
    0x517B: "smb",
    0x19830326: "beegfs",
    0x00C36400: "ceph",
    0x5346414F: "afs",
    0xAAD7AAEA: "panfs",
    0x01161970: "gfs2",
    0x7461636F: "ocfs2",
    0x20030528: "orangefs",
    0x65735546: "fuse",          # sshfs, glusterfs, s3fs, cvmfs...: mostly remote; tracking_mode=direct overrides
}
LOCAL_TYPES = {0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs", 0x794C7630: "overlayfs",
               0x2FC12FC1: "zfs", 0x4D44: "vfat", 0x5346544E: "ntfs", 0xF2F52010: "f2fs", 0x858458F6: "ramfs"}


class _StatFs(ctypes.Structure):
    # Only f_type is read; the buffer is large enough for the whole struct statfs of any 64-bit Linux (120 bytes).
    _fields_ = [("f_type", ctypes.c_long), ("_rest", ctypes.c_byte * 256)]


@functools.lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def magic(path: str | Path) -> int | None:
    """statfs(2)'s f_type of `path` (or of its nearest existing parent); None where statfs is not available."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    buf = _StatFs()
    try:
        if _libc().statfs(str(p).encode(), ctypes.byref(buf)) != 0:
            return None
    except (OSError, AttributeError):  # no libc statfs (not Linux)
        return None
    return buf.f_type & 0xFFFFFFFF


def filesystem_type(path: str | Path) -> str:
    """The filesystem's name ("nfs", "lustre", "ext4", ...), "0x<magic>" for one not listed, "unknown" without
    statfs."""
    f_type = magic(path)
    if f_type is None:
        return "unknown"
    return NETWORK_TYPES.get(f_type) or LOCAL_TYPES.get(f_type) or f"0x{f_type:x}"


def is_network(name: str) -> bool:
    """Whether a filesystem_type() name is a network (shared) filesystem."""
    return name in NETWORK_TYPES.values()
