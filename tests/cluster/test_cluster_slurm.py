"""Cluster sweeps on a real Slurm (started by the session fixture `slurm`): submission of a sweep as a job array,
a custom-op cell killed and cut by its walltime that ends bit-identical to an uninterrupted one, and the resume
command after a job was cancelled."""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.helpers import REPO, job_logs

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _done(sandbox) -> dict:
    (path,) = (sandbox.root / "ck").glob("*/done.json")
    return json.loads(path.read_text())


def _assert_every_epoch_once(sandbox, run, epochs: int) -> None:
    steps = sandbox.epoch_steps(run.info.run_id)
    assert [v for _, v in steps] == [float(e) for e in range(1, epochs + 1)], steps
    assert len({s for s, _ in steps}) == epochs


def test_sweep_2x2_submits_an_array_and_returns(slurm, sandbox):
    t0 = time.time()
    archive = sandbox.root / "gdata"
    out = sandbox.launch("model=lenet300,lenet5", "mult=native,am16", "train.epochs=1", "cluster.walltime=00:10:00",
                         f"cluster.archive_dir={archive}")
    assert time.time() - t0 < 120, "launch must return once submitted"
    submitted = [line for line in out.stdout.splitlines() if "-> job" in line]
    assert len(submitted) == 4, out.stdout
    records = sandbox.records()
    jobs = [r["jobs"][0]["id"] for r in records]
    assert len(set(jobs)) == 4 and len({j.split("_")[0] for j in jobs}) == 1  # one array of 4 tasks

    rows = sandbox.wait_all("finished", timeout=480)
    assert len(rows) == 4 and all(r["epoch"] == 1 and r["test_accuracy"] is not None for r in rows)
    runs = sandbox.finished_runs(4)
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 4
    assert sorted(r.data.tags["amdnn.job_ids"] for r in runs) == sorted(jobs)

    table = sandbox.module("orchestrator.cluster.status").stdout
    print(table)
    assert "4 cells: 0 queued, 0 running, 4 finished, 0 failed" in table
    for model in ("lenet300", "lenet5"):
        assert model in table

    # Finished cells were archived (checkpoints, done.json, and a copy of the SQLite store) by the end of their jobs.
    sandbox.wait_for_jobs(timeout=120)
    for record in records:
        assert (archive / record["name"] / "done.json").exists()
        assert list((archive / record["name"] / "checkpoints").iterdir())
    assert (archive / "mlflow.db").stat().st_size > 0

    again = sandbox.launch("model=lenet300,lenet5", "mult=native,am16", "train.epochs=1", "cluster.walltime=00:10:00",
                           "cluster.wait=true")
    assert "0 cell(s) submitted" in again.stdout and again.stdout.count("not submitted, finished") == 4
    assert "4 cells: 0 queued, 0 running, 4 finished, 0 failed" in again.stdout  # wait=true: the table at the end


# A custom-op cell (am16: every multiply through the compiled op) of about 100 s of work when nothing interrupts it
# (digits, batch 4: ~1 s an epoch after ~15 s of start-up): with a 1-minute walltime it is cut at least once.
# The native walltime path is covered by the PBS test (test_cluster_pbs.py), which runs on this Slurm too.
LONG_CELL = ["mult=am16", "train.batch_size=4", "train.optimizer.lr=0.01", "train.epochs=100"]


def _reference(tmp_path: Path, overrides: list[str]) -> subprocess.Popen:
    """The same cell, uninterrupted, here (cluster=local), into its own checkpoint root and store."""
    ref = tmp_path / "reference"
    ref.mkdir()
    return subprocess.Popen([sys.executable, str(REPO / "launch.py"), "model=lenet300", "dataset=digits", *overrides,
                             f"checkpoint_root={ref / 'ck'}", f"tracking_uri=sqlite:///{ref / 'mlflow.db'}",
                             f"hydra.run.dir={ref / 'out'}"], cwd=ref, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _final_weights(ck_root: Path) -> dict:
    import numpy as np

    (path,) = ck_root.glob("*/final_weights.npz")
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def _job_processes(job_id: str, conf) -> list[int]:
    """The processes of the job on this machine: its id, and our cluster's configuration (another Slurm here may have
    a job of the same number)."""
    marks = {f"SLURM_JOB_ID={job_id}".encode(), *([f"SLURM_CONF={conf}".encode()] if conf else [])}
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marks <= set((proc / "environ").read_bytes().split(b"\0")):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _cuts(sandbox) -> list[dict]:
    """The cell's checkpoints at a walltime warning so far (its events file's "preempted" lines)."""
    files = list((sandbox.root / "ck").glob("*/events.jsonl"))
    lines = files[0].read_text().splitlines() if files else []
    return [e for e in map(json.loads, lines) if e["event"] == "preempted"]


def _kill_a_run_before_its_warning(sandbox, job: str, conf, kill_after_s: float, timeout: float = 300) -> int:
    """SIGKILL every process of the job kill_after_s after the first process of one of its runs appeared, all
    stopped first so that none reacts to another's death: what a crash or the OOM killer leaves. Slurm's own signals
    cannot do it: `scancel --signal=KILL` becomes a cancellation, which gives the job a SIGTERM and the time to
    checkpoint.

    With a 1-minute walltime Slurm may send the walltime warning at any moment of a run (up to 60 s early, its event
    resolution; sbatch --signal), even before the test sees the run's processes (on a loaded 2-core machine the
    launch itself can outlast it: seeds 62134 and 424265). A run that checkpointed at the warning before the kill is
    not the crash this test is about: it is let go on (it requeues itself as the same job) and the kill waits for the
    job's next run, at the same delay. Returns the number of runs so let go."""
    let_go, seen = 0, set()
    deadline = time.time() + timeout
    while True:
        while not (started := [p for p in _job_processes(job, conf) if p not in seen]):
            if time.time() > deadline:
                if conf is None and not seen:
                    pytest.skip(f"job {job} of AMDNN_TEST_SLURM=system runs on another machine: it cannot be killed here")
                raise AssertionError(f"no (new) process of job {job} appeared on this machine within {timeout:.0f} s")
            time.sleep(0.2)
        time.sleep(kill_after_s)  # start-up, the first steps, a checkpoint write or an MLflow flush
        pids = _job_processes(job, conf)
        _signal(pids, signal.SIGSTOP)  # frozen: whatever the run has written now is all it will ever write
        # A cut's event names the process that wrote it: one of these means this run checkpointed at the warning.
        if pids and not {e["pid"] for e in _cuts(sandbox)} & set(pids):
            _signal(pids, signal.SIGKILL)
            return let_go
        _signal(pids, signal.SIGCONT)
        seen |= set(started) | set(pids)
        if pids:  # (none: the run we saw ended in the meantime, a cut run requeuing itself)
            let_go += 1
            print(f"job {job}'s run was cut by its walltime warning before the kill: waiting for its next run")


def test_am16_cell_killed_and_walltime_cut_ends_bit_identical(slurm, sandbox, tmp_path):
    """Killed hard (SIGKILL to every process of the job: no checkpoint on the way out) at a random moment, resumed by
    the resume command, then cut by its walltime and requeued: the final weights and every epoch's metrics equal an
    uninterrupted run's bit for bit."""
    seed = int(os.environ.get("AMDNN_TEST_SEED", time.time_ns() % 10**6))
    # Within 12 s of a run's first process: most kills then land before Slurm's walltime warning (see
    # _kill_a_run_before_its_warning for the runs where it came first).
    kill_after_s = random.Random(seed).uniform(0.0, 12.0)
    print(f"kill {kill_after_s:.1f} s after the job's first process started (AMDNN_TEST_SEED={seed})")
    sandbox.launch(*LONG_CELL, "cluster.walltime=00:01:00", "cluster.max_requeues=30")
    reference = _reference(tmp_path, LONG_CELL)
    (record,) = sandbox.records()
    first = record["jobs"][0]["id"]
    let_go = _kill_a_run_before_its_warning(sandbox, first, slurm.conf, kill_after_s)
    cuts_before = len(_cuts(sandbox))
    sandbox.wait(lambda rows: rows[0]["state"] == "failed", timeout=120, poll=1, what="the killed job seen dead")
    assert len(_cuts(sandbox)) == cuts_before, "the kill must not leave time for a checkpoint"
    assert "resubmitted as job" in sandbox.module("orchestrator.cluster.resume").stdout

    rows = sandbox.wait_all("finished", timeout=900)
    assert reference.wait(timeout=600) == 0
    (record,) = sandbox.records()
    assert [j["how"] for j in record["jobs"]] == ["launch", "resume"]
    (events_file,) = (sandbox.root / "ck").glob("*/events.jsonl")
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    cuts = [e for e in events if e["event"] == "preempted"]  # a checkpoint at the walltime warning
    # the first job's only from runs warned before the kill; the resumed job cut at least once
    assert [e["job_id"] for e in cuts[:cuts_before]] == [first] * cuts_before, events
    assert cuts[cuts_before:] and all(e["job_id"] == record["jobs"][1]["id"] for e in cuts[cuts_before:]), events
    (run,) = sandbox.finished_runs(1)
    assert run.info.status == "FINISHED" and rows[0]["epoch"] == 100
    _assert_every_epoch_once(sandbox, run, 100)

    weights, ref_weights = _final_weights(sandbox.root / "ck"), _final_weights(tmp_path / "reference/ck")
    assert sorted(weights) == sorted(ref_weights)
    different = [k for k in weights if weights[k].tobytes() != ref_weights[k].tobytes()]
    assert not different, f"final weights differ from the uninterrupted run in {different}"
    (ref_done,) = (tmp_path / "reference/ck").glob("*/done.json")
    ref = json.loads(ref_done.read_text())
    done = _done(sandbox)
    history = lambda d: [{k: v for k, v in e.items() if k != "epoch_time_s"} for e in d["history"]]  # noqa: E731
    assert history(done) == history(ref) and done["test_accuracy"] == ref["test_accuracy"]
    print(f"killed job {first} after {kill_after_s:.1f} s ({let_go} run(s) warned first let go), "
          f"{len(cuts) - cuts_before} walltime cut(s) of job "
          f"{record['jobs'][1]['id']}; final accuracy {done['test_accuracy']}")


def _wait_for_checkpoint(sandbox, timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        events = list((sandbox.root / "ck").glob("*/events.jsonl"))
        if events and any(json.loads(line).get("event") == "start" for line in events[0].read_text().splitlines()) \
                and len(list((sandbox.root / "ck").glob("*/checkpoints/*"))) >= 3:
            return
        time.sleep(1)
    raise AssertionError("the cell never started writing checkpoints")


def test_cancelled_job_is_resubmitted_once_and_resumes(slurm, sandbox):
    archive = sandbox.root / "gdata"
    # ~0.6 s an epoch: cancelled at its third checkpoint (~1.5 epochs in); the resumed job has the rest to train.
    sandbox.launch("mult=native", "train.batch_size=4", "train.optimizer.lr=0.01", "train.epochs=20",
                   "cluster.walltime=00:10:00", f"cluster.archive_dir={archive}", "cluster.archive_every_min=0.05")
    (record,) = sandbox.records()
    job = record["jobs"][0]["id"]
    sandbox.wait(lambda rows: rows[0]["state"] == "running", timeout=120, poll=1, what="the job running")
    _wait_for_checkpoint(sandbox, timeout=120)
    subprocess.run(["scancel", job], check=True)
    sandbox.wait(lambda rows: rows[0]["state"] == "failed", timeout=120, poll=2, what="the cancelled job seen dead")

    # Archived while it ran (every 3 s here); then scratch is "purged": the resume restores from the archive.
    (cell_dir,) = (sandbox.root / "ck").iterdir()
    assert list((archive / cell_dir.name / "checkpoints").iterdir())
    shutil.rmtree(cell_dir / "checkpoints")

    dry = sandbox.module("orchestrator.cluster.resume", "--dry-run").stdout
    assert "would resubmit" in dry and len(sandbox.records()[0]["jobs"]) == 1

    # Two resume commands at once: one resubmits, the other does nothing.
    cmd = [sys.executable, "-m", "orchestrator.cluster.resume", "--state-dir", str(sandbox.state_dir)]
    procs = [subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    (record,) = sandbox.records()
    assert [j["how"] for j in record["jobs"]] == ["launch", "resume"], outs
    assert record["attempts"] == 2
    assert sum("resubmitted as job" in o for o, _ in outs) == 1, outs
    (run,) = sandbox.runs()
    assert run.info.status == "FAILED" and run.data.tags.get("amdnn.died_job_id") == job  # marked while dead

    sandbox.wait_all("finished", timeout=300)
    (run,) = sandbox.finished_runs(1)
    assert run.info.status == "FINISHED"
    _assert_every_epoch_once(sandbox, run, 20)
    assert sum("restored its checkpoints" in o for o, _ in outs) == 1, outs
    resumed = re.findall(r"resumed from step-(\d+)\.json", job_logs(sandbox))
    assert resumed and int(resumed[-1]) > 0, "the resubmitted job must resume, not start over"
    # The job ids go with the run's start (launcher._job_tags), so a FINISHED run has them all.
    assert run.data.tags["amdnn.job_ids"].split(",") == [job, record["jobs"][1]["id"]]
    # Nothing left to do.
    assert "nothing to do" in sandbox.module("orchestrator.cluster.resume").stdout


def test_hand_written_slurm_script_runs_a_cell(slurm, sandbox):
    """jobs/slurm.sbatch, submitted by hand from the repository root, trains its cell."""
    overrides = [o for o in sandbox.overrides("mult=native", "train.epochs=2")
                 if not o.startswith(("cluster", "hydra.sweep"))]
    out = subprocess.run(["sbatch", "--parsable", "--cpus-per-task=1", "--mem=2GB",
                          f"--output={sandbox.root / 'hand-%j.out'}", "jobs/slurm.sbatch", *overrides],
                         cwd=REPO, capture_output=True, text=True, check=True)
    job = out.stdout.strip().split(";")[0]
    deadline = time.time() + 240
    while time.time() < deadline:
        state = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", job], capture_output=True,
                               text=True).stdout.strip()
        if state and state.split()[0] not in ("PENDING", "RUNNING", "COMPLETING", "REQUEUED"):
            break
        time.sleep(3)
    log = "".join(p.read_text() for p in sandbox.root.glob("hand-*.out"))
    assert state.startswith("COMPLETED"), f"{state}\n{log[-3000:]}"
    assert _done(sandbox)["epochs"] == 2 and "finished" in log
