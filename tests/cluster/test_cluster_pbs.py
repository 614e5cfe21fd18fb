"""PBS through real qsub/qstat/qdel commands: Slurm's Torque wrappers (package slurm-wlm-torque) on the session's
Slurm. No PBS Pro server can run here, so PBS Pro itself is covered by its job script (golden file) and its JSON
qstat output (test_cluster_qstat.py); everything that talks to a scheduler is exercised here, in the Torque dialect.
"""
from __future__ import annotations

import time

import pytest

from tests.cluster.helpers import job_logs

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_pbs_submit_state_walltime_continuation_finish(slurm, sandbox, monkeypatch):
    monkeypatch.setenv("AMDNN_PBS_FLAVOUR", "torque")
    # The job's own timer checkpoints warn_before_s before the walltime: here 40 s after a job starts, 15-20 s of them
    # start-up, so a job trains 35-43 epochs (~0.6 s each on the 2-core machine, unloaded): 120 epochs are three jobs,
    # and at least one continuation on a machine twice as fast (~100 epochs a job). The default warning (10 s before
    # the 1-minute walltime) makes 50-s jobs, which took four for the 200 epochs this test trained before 2026-11-28.
    # A loaded machine starts jobs slowly and trains fewer epochs in each: requeues enough for it.
    epochs = 120
    out = sandbox.launch("cluster=pbs", "cluster.flavour=torque", "mult=native", "train.batch_size=4",
                         "train.optimizer.lr=0.01", f"train.epochs={epochs}", "cluster.walltime=00:01:00",
                         "cluster.warn_before_s=20", "cluster.max_requeues=30")
    assert "submitted to pbs" in out.stdout
    (record,) = sandbox.records()
    first = record["jobs"][0]["id"]

    # State through qstat (the plugin's watcher and the status command).
    from orchestrator.schedulers.pbs.executor import qstat_flavour, query_states

    qstat_flavour.cache_clear()
    assert query_states([first]).get(first) in ("PENDING", "RUNNING")
    sandbox.wait(lambda rows: rows[0]["state"] in ("queued", "running"), timeout=30, poll=1)

    rows = sandbox.wait_all("finished", timeout=720)
    (record,) = sandbox.records()
    hows = [j["how"] for j in record["jobs"]]
    assert hows[0] == "launch" and hows.count("continuation") >= 1, hows
    assert record["attempts"] == 1  # continuations are not attempts
    logs = job_logs(sandbox)
    assert "Walltime minus" in logs and "resumed from step-" in logs
    (run,) = sandbox.finished_runs(1)
    assert run.info.status == "FINISHED" and rows[0]["epoch"] == epochs
    steps = sandbox.epoch_steps(run.info.run_id)
    assert [v for _, v in steps] == [float(e) for e in range(1, epochs + 1)]
    # The last job's run start carries every job id (launcher._job_tags), so a FINISHED run has them all.
    assert run.data.tags["amdnn.job_ids"].split(",") == [j["id"] for j in record["jobs"]]
    assert run.data.tags["amdnn.scheduler"] == "pbs"


def test_pbs_qdel_through_the_plugin(slurm, tmp_path, monkeypatch):
    """submitit's own interface to the plugin: submit a function, see it queued or running, cancel it with qdel."""
    monkeypatch.setenv("AMDNN_PBS_FLAVOUR", "torque")
    from orchestrator.schedulers.pbs.executor import PBSExecutor, qstat_flavour

    qstat_flavour.cache_clear()
    executor = PBSExecutor(tmp_path / "%j")
    executor.update_parameters(job_name="sleeper", walltime="00:05:00", ncpus=1, mem="1GB", flavour="torque",
                               warn_before_s=30)
    job = executor.submit(time.sleep, 120)
    info = job.watcher.get_info(job.job_id, mode="force")  # qstat -f text, parsed
    assert info["State"] in ("PENDING", "RUNNING") and info["job_state"] in ("Q", "R"), info
    assert info["Job_Name"] == "sleeper" and info["Resource_List.walltime"] == "00:05:00", info
    job.cancel()
    deadline = time.time() + 60
    while time.time() < deadline and job.watcher.get_state(job.job_id, mode="force") in ("PENDING", "RUNNING"):
        time.sleep(1)
    assert job.watcher.get_state(job.job_id, mode="force") not in ("PENDING", "RUNNING")
