"""Importing queued tracking records into an SQLite store, one writer at a time (single-writer mode).

    summary = import_pending(uri)      # every registered queue's new records into the store, under its writer lock
    print(summary.line())              # "tracking: 120 record(s) of 7 cell(s) imported into ...; 0 wait"
    with writing(uri): ...             # any other write to the store (the resume cron marking a run FAILED)

The status command, the report, the resume cron and the launchers call import_pending before they read the store, so
what they show is current; jobs of single-writer mode only append to their queues and enter them in the store's
register (orchestrator.tracking.queue). An import reads each queue up to its last complete line, so a queue whose
job is still appending is imported as far as it goes; it moves a queue's sent offset only once the records are
committed, so an importer killed anywhere leaves records to send again, which sending logs once.
"""
from __future__ import annotations

import argparse
import contextlib
import resource
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from orchestrator.common import paths
from orchestrator.tracking.queue import CellQueue, flocked, registered, writer_lock_path
from orchestrator.tracking.writer import Cell, StoreWriter

LOCK_WAIT_S = 30.0   # how long a reader waits for another writer's import before showing what it has
# Queues held (locked, one open file each) per commit: a commit costs 2-3 fsyncs, 10-200 ms on a busy disk, so as
# many as half the open-file limit allows (1024 by default: 512 queues).
GROUP = max(16, min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2))


@dataclass
class Summary:
    uri: str
    queues: int = 0       # cells in the store's register (jobs of single-writer mode)
    imported: int = 0     # records written by this call
    cells: int = 0        # cells they came from
    waiting: int = 0      # records left queued (another writer holds a queue, or the store failed)
    problem: str = ""     # why records wait

    def line(self) -> str:
        text = f"tracking: {self.queues} single-writer queue(s) of {self.uri}: {self.imported} record(s) of " \
               f"{self.cells} cell(s) imported, {self.waiting} wait"
        return text + (f" ({self.problem})" if self.problem else "")


@contextlib.contextmanager
def writing(uri: str, timeout_s: float | None = None) -> Iterator[bool]:
    """The store's writer lock for an SQLite store (yields whether it was obtained); nothing to hold for others."""
    db = paths.sqlite_path(uri)
    if db is None:
        yield True
        return
    with flocked(writer_lock_path(db), timeout_s) as got:
        yield got


def import_pending(uri: str, lock_wait_s: float = LOCK_WAIT_S) -> Summary:
    """Import every registered queue's unsent records into the SQLite store `uri` (nothing for other stores)."""
    summary = Summary(uri)
    db = paths.sqlite_path(uri)
    entries = registered(db) if db is not None else []
    summary.queues = len(entries)
    if not entries:
        return summary
    with writing(uri, lock_wait_s) as got:
        if not got:
            summary.waiting = sum(CellQueue(Path(e["cell_dir"])).waiting() for e in entries)
            summary.problem = f"another writer holds {writer_lock_path(db)}"  # type: ignore[arg-type]
            return summary
        writer = StoreWriter(uri)
        try:
            _import(writer, entries, summary)
        except Exception as error:  # noqa: BLE001 - the reader still shows what the store has
            summary.problem = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            summary.waiting = sum(CellQueue(Path(e["cell_dir"])).waiting() for e in entries)
        finally:
            writer.close()
    return summary


def _import(writer: StoreWriter, entries: list[dict], summary: Summary) -> None:
    marks: list[tuple[CellQueue, int, int]] = []   # (queue, offset once committed, records)
    with contextlib.ExitStack() as held:
        def commit() -> None:
            writer.commit()
            for queue, offset, count in marks:
                queue.mark_sent(offset)
                summary.imported += count
                summary.cells += 1
            marks.clear()
            held.close()

        for entry in entries:
            queue = CellQueue(Path(entry["cell_dir"]))
            records, offset = queue.unsent()
            if not records:
                continue
            # A cell sending its own queue (direct mode) holds this lock for a moment; its records wait for the next import.
            if not held.enter_context(queue.sending(timeout_s=0)):
                summary.waiting += len(records)
                continue
            records, offset = queue.unsent()  # what was appended meanwhile too
            writer.write(Cell(entry["identity"], entry["experiment"], queue.cell_dir, entry.get("run_name")), records)
            marks.append((queue, offset, len(records)))
            if len(marks) >= GROUP:
                commit()
        commit()


def import_for(uris: Iterable[str], out=sys.stderr, always: bool = False) -> list[Summary]:
    """import_pending for each distinct store of `uris`; each summary printed to `out` where the store has queues
    (always) or where anything was imported or waits."""
    summaries = []
    for uri in sorted(set(uris)):
        summary = import_pending(uri)
        if always and summary.queues or summary.imported or summary.waiting or summary.problem:
            print(summary.line(), file=out, flush=True)
        summaries.append(summary)
    return summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.tracking.importer",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", default=None, help="default: $MLFLOW_TRACKING_URI or <repo>/mlflow.db")
    args = parser.parse_args(argv)
    summary = import_pending(paths.tracking_uri(args.tracking_uri))
    print(summary.line())
    return 1 if summary.problem else 0


if __name__ == "__main__":
    sys.exit(main())
