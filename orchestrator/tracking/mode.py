"""How records reach the tracking store: sent by every process that has them (direct), or imported by one writer.

    mode = resolve(cfg["tracking_mode"], uri)     # Mode(name="single_writer", why="sqlite store on lustre (...)")

- direct: each cell's process sends its queued records itself. Right for a tracking server (http(s)://, which takes
  concurrent writers) and for an SQLite file on a local disk (one machine's locks work).
- single_writer: for an SQLite file on a network filesystem (NFS, Lustre, GPFS, ...), where SQLite's locks cannot be
  trusted: a cell in a scheduler's job never opens the store, it only appends to its durable queue
  (orchestrator.tracking.queue); one writer at a time imports the queues, under the store's writer lock
  (orchestrator.tracking.importer): the launcher, the resume cron, `status` and `report`, and a cell running outside
  any job (cluster=local).

- queue: every cell, in a job or not, only appends to its queue and enters it in the register; nothing on the
  machine that trains opens the store or needs MLflow. For GPU nodes with no route to the store: copy the store's
  register and the cell folders back (to the same paths) and run `python -m orchestrator.tracking.importer` there.

`tracking_mode: auto` (conf/config.yaml) picks single_writer exactly when the store is an SQLite file on a network
filesystem (orchestrator.common.filesystems); `direct` or `single_writer` force one.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

from orchestrator.common import paths
from orchestrator.common.filesystems import filesystem_type, is_network

AUTO, DIRECT, SINGLE_WRITER, QUEUE = "auto", "direct", "single_writer", "queue"
MODES = (AUTO, DIRECT, SINGLE_WRITER, QUEUE)   # the values of the config key tracking_mode
QUEUEING = (SINGLE_WRITER, QUEUE)              # the modes whose records go through the register and the importers


class Mode(NamedTuple):
    name: str     # DIRECT, SINGLE_WRITER or QUEUE
    why: str      # one line for the user: what decided it


def problem(setting: object, uri: str) -> str | None:
    """What is wrong with tracking_mode=`setting` for the store `uri`, or None (config.validate reports it)."""
    if setting not in MODES:
        return f"tracking_mode={setting!r} is not one of {', '.join(MODES)}"
    if setting in QUEUEING and paths.sqlite_path(uri) is None:
        return (f"tracking_mode={setting} imports queues into an SQLite file, but the tracking URI is {uri}: "
                f"a server or database takes concurrent writers itself (use tracking_mode=auto or direct)")
    return None


@functools.lru_cache(maxsize=64)
def resolve(setting: str, uri: str) -> Mode:
    """The mode for tracking_mode=`setting` and the store `uri` (checked by problem() first)."""
    db = paths.sqlite_path(uri)
    if db is None:
        return Mode(DIRECT, f"the store {uri} is not an SQLite file: every cell sends to it itself")
    fs = filesystem_type(db.parent)
    where = f"SQLite store on {fs} ({db.parent})"
    if setting == QUEUE:
        return Mode(QUEUE, f"{where}; tracking_mode=queue: cells only queue, the importer sends "
                           f"(python -m orchestrator.tracking.importer)")
    if setting == SINGLE_WRITER:
        return Mode(SINGLE_WRITER, f"{where}; tracking_mode=single_writer")
    if setting == DIRECT:
        return Mode(DIRECT, f"{where}; tracking_mode=direct")
    if is_network(fs):
        return Mode(SINGLE_WRITER, f"{where}, a network filesystem: jobs queue, one writer imports "
                                   f"(tracking_mode=auto)")
    return Mode(DIRECT, f"{where}, a local filesystem: every cell writes it itself (tracking_mode=auto)")
