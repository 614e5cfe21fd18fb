"""The grid as a table: every launched cell's state (queued, running, finished, failed), submission attempts, epoch
progress, latest test accuracy, scheduler job id, and why a cell is not moving: the scheduler's reason for a job that
waits (Slurm's squeue reason, PBS's comment), and for a failed cell its last error line (from its events, else from
its job's log) and whether the resume cron gave up on it (cluster.max_attempts used).

    python -m orchestrator.cluster.status [--state-dir DIR] [--json]

States come from three places, in this order of authority: the cell's done.json (in its checkpoint folder, or in
the archive when scratch was purged) says finished; the scheduler says whether the cell's latest job is queued or
running; anything else is failed (the job died, was cancelled, or ran out of requeues) and is what the resume cron
resubmits. Progress and accuracy come from the cell's MLflow run.
"""
from __future__ import annotations

import argparse
import json
import sys
import typing as tp
from collections import defaultdict
from pathlib import Path

from orchestrator.cluster.grid import Grid, latest_job
from orchestrator.common import cellfiles
from orchestrator.schedulers import job_status
from orchestrator.tracking.importer import import_for
from orchestrator.tracking.reads import cell_runs
from orchestrator.tracking.tracker import TAG_CELL

STATES = ("queued", "running", "finished", "failed")


def archived_cell_dir(record: dict) -> tp.Optional[Path]:
    archive = record.get("archive_dir")
    return Path(archive) / record["name"] if archive else None


def done_info(record: dict) -> tp.Optional[dict]:
    """The cell's done.json, from its folder or else from the archive (scratch may have been purged)."""
    for folder in (Path(record["cell_dir"]), archived_cell_dir(record)):
        if folder is None:
            continue
        done = cellfiles.read_json(folder / cellfiles.DONE)
        if done and done.get("identity") == record["identity"]:
            return done
    return None


def scheduler_states(records: tp.Iterable[dict]) -> tp.Dict[str, str]:
    """{job id: state} for every record's latest job, one scheduler query per scheduler."""
    wanted: tp.Dict[str, tp.List[str]] = defaultdict(list)
    for record in records:
        job = latest_job(record)
        if job and not done_info(record):
            wanted[record["executor"]["scheduler"]].append(job)
    states: tp.Dict[str, str] = {}
    for scheduler, ids in wanted.items():
        states.update(job_status.job_states(scheduler, ids))
    return states


def cell_state(record: dict, states: tp.Mapping[str, str]) -> str:
    if done_info(record):
        return "finished"
    state = states.get(latest_job(record) or "")
    if state in job_status.QUEUED:
        return "queued"
    if state in job_status.RUNNING:
        return "running"
    return "failed"


def _last_line(text: str) -> tp.Optional[str]:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def job_log_error(record: dict) -> tp.Optional[str]:
    """The last line of the stderr log of the cell's latest job (submitit's <folder>/<job>_<task>_log.err)."""
    job = latest_job(record)
    folder = (record.get("executor") or {}).get("folder")
    if not job or not folder:
        return None
    for log in sorted(Path(folder.replace("%j", job)).glob("*_log.err")):
        try:
            line = _last_line(log.read_text(errors="replace")[-20000:])
        except OSError:
            continue
        if line:
            return line
    return None


def last_error(record: dict) -> tp.Optional[str]:
    """Why the cell's last attempt failed: its last failed or crash event (the cell's folder, else the archive), else
    the last line of its job's log."""
    for folder in (Path(record["cell_dir"]), archived_cell_dir(record)):
        if folder is None:
            continue
        for event in reversed(cellfiles.events(folder)):
            if event["event"] in ("failed", "crash"):
                return _last_line(str(event.get("error") or event.get("how") or event["event"]))
            if event["event"] in ("finished", "preempted"):
                break
    return job_log_error(record)


def why(record: dict, state: str, job_state: str, reason: tp.Optional[str]) -> str:
    """One line: why a queued cell waits, or why a failed one failed and what happens to it next."""
    if state == "queued":
        return f"waiting: {reason}" if reason else ""
    if state != "failed":
        return ""
    attempts, limit = record.get("attempts", 0), record.get("max_attempts")
    error = last_error(record) or f"job {latest_job(record)} ended {job_state if job_state != '-' else 'unseen'}"
    if limit is not None and attempts >= limit:
        return f"gave up after {attempts} of cluster.max_attempts={limit} attempts: {error}"
    return f"resubmitted by the resume cron: {error}"


def progress(records: tp.Iterable[dict]) -> tp.Dict[str, dict]:
    """{identity: {"epoch", "test_accuracy", "run_id", "run_status"}} from MLflow, one read per store/experiment."""
    groups: tp.Dict[tp.Tuple[str, str], tp.Set[str]] = defaultdict(set)
    for record in records:
        groups[(record["tracking_uri"], record["experiment"])].add(record["identity"])
    out: tp.Dict[str, dict] = {}
    for (uri, experiment), identities in groups.items():
        try:
            runs = cell_runs(uri, experiment)
        except Exception as e:  # noqa: BLE001 - the table is still useful without progress
            print(f"[amdnn] cannot read MLflow at {uri} ({type(e).__name__}: {e}); progress not shown", file=sys.stderr)
            continue
        for run in runs:
            identity = run.tags.get(TAG_CELL)
            if identity in identities and identity not in out:
                out[identity] = {"epoch": run.metrics.get("epoch"), "test_accuracy": run.metrics.get("test_accuracy"),
                                 "run_id": run.run_id, "run_status": run.status}
    return out


def rows(grid: Grid) -> tp.List[dict]:
    records = grid.cells()
    states = scheduler_states(records)
    prog = progress(records)
    waiting = defaultdict(list)
    for record in records:
        if cell_state(record, states) == "queued":
            waiting[record["executor"]["scheduler"]].append(latest_job(record))
    reasons: tp.Dict[str, str] = {}
    for scheduler, ids in waiting.items():
        reasons.update(job_status.job_reasons(scheduler, ids))
    out = []
    for record in records:
        p = prog.get(record["identity"], {})
        done = done_info(record)
        state = cell_state(record, states)
        job_state = states.get(latest_job(record) or "", "-")
        epoch = p.get("epoch") or (done or {}).get("epochs") or 0
        accuracy = (done or {}).get("test_accuracy", p.get("test_accuracy"))
        out.append({
            "cell": record["name"], "model": record["model"], "mult": record["mult"], "dataset": record["dataset"],
            "seed": record["seed"], "state": state, "attempts": record.get("attempts", 0),
            "max_attempts": record.get("max_attempts"), "epoch": int(epoch), "epochs": record.get("epochs"),
            "test_accuracy": accuracy, "job_id": latest_job(record),
            "job_state": job_state, "scheduler": record["executor"]["scheduler"],
            "run_id": p.get("run_id"), "run_status": p.get("run_status"),
            "why": why(record, state, job_state, reasons.get(latest_job(record) or ""))})
    return out


def table(rows_: tp.List[dict]) -> str:
    head = ["model", "mult", "dataset", "seed", "state", "attempts", "epoch", "test acc", "job id", "job state", "why"]
    body = [[r["model"], r["mult"], r["dataset"], str(r["seed"]), r["state"],
             f"{r['attempts']}/{r['max_attempts']}", f"{r['epoch']}/{r['epochs']}",
             "-" if r["test_accuracy"] is None else f"{r['test_accuracy']:.4f}",
             f"{r['job_id'] or '-'} ({r['scheduler']})", r["job_state"], r.get("why") or ""] for r in rows_]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    counts = ", ".join(f"{sum(r['state'] == s for r in rows_)} {s}" for s in STATES)
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, body),
                      f"\n{len(rows_)} cells: {counts}"])


def main(argv: tp.Optional[tp.List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-dir", help="the grid record (default: $AMDNN_STATE_DIR, else <repo>/.amdnn)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    grid = Grid(args.state_dir)
    import_for((c["tracking_uri"] for c in grid.cells()), out=sys.stderr if args.json else sys.stdout,
               always=True)
    r = rows(grid)
    if not r:
        print(f"no launched cells recorded in {grid.root} (cluster sweeps record what they submit there)")
        return 0
    print(json.dumps(r, indent=1) if args.json else table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
