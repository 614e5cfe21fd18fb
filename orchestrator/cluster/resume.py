"""The resume cron: every launched cell that is neither finished nor queued nor running is submitted again, with the
same identity, so that it resumes from its checkpoint; the MLflow run of a job that died is marked FAILED.

    python -m orchestrator.cluster.resume [--dry-run] [--state-dir DIR]       (jobs/resume.cron runs it)

- bounded: a cell is submitted at most cluster.max_attempts times (launch included), then left as failed;
- safe when runs overlap: a run that finds another one holding the lock does nothing; launches take the same lock;
- a cell whose scratch folder lost its checkpoints gets them back from the archive before it is resubmitted;
- the cells' queued tracking records are imported first (single-writer mode, orchestrator.tracking.importer), and an
  SQLite store the jobs do not archive themselves is copied into the archive;
- --dry-run says what it would do and changes nothing (no submission, no MLflow change);
- when the grid's last cell has finished, the report is written and logged to MLflow, once (grid_report).
"""
from __future__ import annotations

import argparse
import sys
import typing as tp
from pathlib import Path

from orchestrator.cluster.archive import archive_tracking, restore_cell
from orchestrator.cluster.grid import Grid, latest_job
from orchestrator.cluster.grid_report import report_if_complete
from orchestrator.cluster.status import cell_state, scheduler_states
from orchestrator.schedulers.submit import resubmit
from orchestrator.tracking.importer import LOCK_WAIT_S, import_for, writing
from orchestrator.tracking.mode import SINGLE_WRITER, resolve
from orchestrator.tracking.tracker import TAG_CELL


def mark_run_failed(record: dict, job_id: tp.Optional[str]) -> bool:
    """Set the cell's MLflow run to FAILED if it still says RUNNING (its job died without ending it), as the store's
    one writer (tracking.importer.writing)."""
    with writing(record["tracking_uri"], timeout_s=LOCK_WAIT_S) as got:
        if not got:
            raise TimeoutError(f"another writer held the store {record['tracking_uri']} for {LOCK_WAIT_S:.0f} s")
        return _mark_run_failed(record, job_id)


def _mark_run_failed(record: dict, job_id: tp.Optional[str]) -> bool:
    # here, not at the top: only this path needs MLflow, which the cron's other work does not load
    from mlflow.tracking import MlflowClient  # pylint: disable=import-outside-toplevel

    client = MlflowClient(record["tracking_uri"])
    exp = client.get_experiment_by_name(record["experiment"])
    if exp is None:
        return False
    runs = client.search_runs([exp.experiment_id], f"tags.`{TAG_CELL}` = '{record['identity']}'")
    changed = False
    for run in runs:
        if run.info.status == "RUNNING":
            client.set_tag(run.info.run_id, "amdnn.died_job_id", str(job_id))
            client.set_terminated(run.info.run_id, "FAILED")
            changed = True
    return changed


def archive_stores(records: tp.Iterable[dict]) -> None:
    """Copy each SQLite store whose jobs do not (single-writer mode) into the archive dirs of its cells."""
    pairs = {(r["tracking_uri"], r["archive_dir"]) for r in records if r.get("archive_dir")
             and resolve(r.get("tracking_mode", "auto"), r["tracking_uri"]).name == SINGLE_WRITER}
    for uri, archive_dir in sorted(pairs):
        try:
            with writing(uri, timeout_s=LOCK_WAIT_S) as got:
                if got:
                    archive_tracking(uri, Path(archive_dir))
        except Exception as e:  # noqa: BLE001 - an archive copy must not stop the resubmissions
            print(f"[amdnn] could not archive the store {uri} into {archive_dir}: {e}", file=sys.stderr)


def resume(grid: Grid, dry_run: bool = False, out: tp.TextIO = sys.stdout) -> tp.List[tp.Tuple[str, str]]:
    """Do (or with dry_run, describe) one resume pass; returns [(cell name, action)]."""
    actions: tp.List[tp.Tuple[str, str]] = []
    with grid.locked("resume.lock", blocking=False) as got:
        if not got:
            print(f"another resume (or a launch) holds {grid.root / 'resume.lock'}: nothing done", file=out)
            return actions
        records = grid.cells()
        if not dry_run:  # the queues first: a run's state in the store must be current before it is judged
            import_for(r["tracking_uri"] for r in records)
            archive_stores(records)
        states = scheduler_states(records)
        cell_states = [cell_state(record, states) for record in records]
        if not dry_run:
            report_if_complete(grid, records, cell_states, out)
        for record, state in zip(records, cell_states):
            name, job = record["name"], latest_job(record)
            if state != "failed":
                continue
            if not dry_run:
                try:
                    if mark_run_failed(record, job):
                        actions.append((name, f"marked its MLflow run FAILED (job {job} died)"))
                except Exception as e:  # noqa: BLE001 - the store may be down; resubmitting matters more
                    print(f"[amdnn] {name}: could not mark its MLflow run FAILED: {e}", file=sys.stderr)
            attempts, limit = record.get("attempts", 0), record["max_attempts"]  # the launch wrote cluster.max_attempts
            if attempts >= limit:
                actions.append((name, f"gave up: {attempts} of cluster.max_attempts={limit} attempts used "
                                      f"(last job {job}, {states.get(job or '', 'gone')})"))
                continue
            if dry_run:
                actions.append((name, f"would resubmit (attempt {attempts + 1} of {limit}; last job {job}, "
                                      f"{states.get(job or '', 'gone')})"))
                continue
            if record.get("archive_dir") and restore_cell(record["cell_dir"], record["archive_dir"]):
                actions.append((name, f"restored its checkpoints from {record['archive_dir']}"))
            new_id = resubmit(record["executor"], grid.load_call(name))
            grid.add_job(name, new_id, "resume")
            actions.append((name, f"resubmitted as job {new_id} (attempt {attempts + 1} of {limit})"))
    for name, what in actions:
        print(f"{name}: {what}", file=out)
    if not actions:
        print("every launched cell is finished, queued or running: nothing to do", file=out)
    return actions


def main(argv: tp.Optional[tp.List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    parser.add_argument("--state-dir", help="the grid record (default: $AMDNN_STATE_DIR, else <repo>/.amdnn)")
    args = parser.parse_args(argv)
    resume(Grid(args.state_dir), dry_run=args.dry_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
