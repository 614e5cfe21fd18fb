"""A grid that explains itself: a request no node of the partition can ever run is refused before anything is
submitted, with the limit in the message (real Slurm); `status` gives the scheduler's reason for a job that waits and,
for a cell that used up its attempts, the last error line (real Slurm). The limits readers are also checked on
scheduler answers as text: Slurm's from this Slurm's own format, PBS Pro's `qstat -Qf` from a file written in PBS
Pro's documented format (no PBS Pro server can run here; Slurm's Torque wrappers have no qstat -Q)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.schedulers import limits
from tests.cluster.helpers import REPO

DATA = Path(__file__).parent / "data"


def slurm_cluster_is_private() -> bool:
    """The suite's own Slurm (one partition, debug), not the machine's (AMDNN_TEST_SLURM=system)."""
    return os.environ.get("AMDNN_TEST_SLURM", "private") == "private"

PARTITIONS = ("PartitionName=debug AllowGroups=ALL Default=YES MaxNodes=UNLIMITED MaxTime=UNLIMITED Nodes=vm "
              "TotalCPUs=2 TotalNodes=1 MaxMemPerNode=UNLIMITED\n"
              "PartitionName=gpu Default=NO MaxTime=2-00:00:00 MaxCPUsPerNode=32 Nodes=g[1-2] TotalCPUs=128\n")
NODES_GPU = "g1|64|515000|gpu:a100:4(S:0-1)\ng2|64|515000|gpu:a100:4(S:0-1),shard:8\n"


def test_slurm_limits_name_the_node_and_the_limit():
    debug = limits.parse_slurm(PARTITIONS, "vm|2|22000|(null)\n", None)
    assert debug.where == "Slurm partition debug" and debug.max_walltime_s is None
    (problem,) = limits.check_request({"cpus": 4, "mem": 16, "gpus": 0, "walltime": "04:00:00"}, debug)
    assert "cluster.cpus=4 but the largest has 2 CPUs (set cluster.cpus<=2)" in problem
    assert "The node (scontrol show partition, sinfo -N): vm: 2 CPUs, 21 GB, 0 GPUs" in problem
    assert limits.check_request({"cpus": 2, "mem": 16, "gpus": 0, "walltime": "04:00:00"}, debug) == []

    gpu = limits.parse_slurm(PARTITIONS, NODES_GPU, "gpu")
    assert gpu.max_walltime_s == 2 * 86400 and [n.gpus for n in gpu.nodes] == [4, 4]
    problems = limits.check_request({"cpus": 48, "mem": 600, "gpus": 8, "walltime": "72:00:00"}, gpu)
    assert "cluster.walltime=72:00:00 exceeds the Slurm partition gpu limit of 48:00:00" in problems[0]
    assert "cluster.cpus=48 exceeds the Slurm partition gpu limit of 32 CPUs per job" in problems[1]
    assert "cluster.mem=600 but the largest has 503 GB" in problems[2] and "cluster.gpus=8 but the largest has 4" \
        in problems[2]
    assert limits.parse_slurm(PARTITIONS, NODES_GPU, "nosuch") is None


@pytest.mark.parametrize("text, seconds", [("UNLIMITED", None), ("30", 1800), ("30:00", 1800), ("2:00:00", 7200),
                                           ("1-00:00:00", 86400), ("1-2", 93600)])
def test_slurm_time_syntax(text, seconds):
    assert limits.slurm_seconds(text) == seconds


def test_pbs_queue_limits_from_qstat_Qf():
    text = (DATA / "qstat_Qf_pbspro_gpuvolta.txt").read_text()
    volta = limits.parse_pbs_queue(text, "gpuvolta")
    assert (volta.max_walltime_s, volta.max_cpus, volta.max_mem_mb, volta.max_gpus, volta.min_cpus) == \
        (48 * 3600, 960, 2880 * 1024, 80, 12)
    gadi = {"cpus": 12, "mem": 96, "gpus": 1, "walltime": "48:00:00"}
    assert limits.check_request(gadi, volta) == []
    problems = limits.check_request({**gadi, "cpus": 4, "walltime": "50:00:00"}, volta)
    assert problems == ["cluster.walltime=50:00:00 exceeds the PBS queue gpuvolta limit of 48:00:00: set "
                        "cluster.walltime<=48:00:00 (a longer cell continues in the next job)",
                        "cluster.cpus=4 is below the PBS queue gpuvolta minimum of 12 CPUs: set cluster.cpus>=12"]
    assert limits.parse_pbs_queue(text, "normal").max_mem_mb is None
    assert limits.parse_pbs_queue(text, "express") is None
    assert [limits.pbs_mem_mb(t) for t in ("190000mb", "96GB", "1tb", "8w", "x")] == [190000, 98304, 1048576, 0, None]


def _launch(sandbox, *extra: str) -> subprocess.CompletedProcess:
    overrides = [o for o in sandbox.overrides(*extra) if not o.startswith(("cluster.cpus=", "cluster.mem="))] \
        if "--default-request" in extra else sandbox.overrides(*extra)
    overrides = [o for o in overrides if o != "--default-request"]
    return subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", *overrides], cwd=sandbox.root,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.cluster
def test_default_request_on_a_small_node_is_refused_before_submitting(slurm, sandbox):
    proc = _launch(sandbox, "--default-request", "mult=native")  # conf/cluster/_scheduler.yaml: 4 CPUs, 16 GB
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    cpus = os.cpu_count()  # the test Slurm's only node has this machine's CPUs
    if cpus >= 4:
        pytest.skip(f"this machine has {cpus} CPUs: the default request of 4 fits its node")
    assert "sweep refused, nothing submitted" in out and "Traceback" not in out, out[-3000:]
    assert f"cluster.cpus=4 but the largest has {cpus} CPUs (set cluster.cpus<={cpus})" in out, out[-3000:]
    assert f": {cpus} CPUs, " in out  # the node, as sinfo describes it
    assert not (sandbox.state_dir / "cells").exists() or not list((sandbox.state_dir / "cells").iterdir())
    queue = subprocess.run(["squeue", "-h", "-n", "amdnn"], capture_output=True, text=True)
    assert queue.stdout.strip() == ""
    proc = _launch(sandbox, "mult=native", "cluster.partition=nosuch")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "cluster.partition=nosuch is not a partition of this Slurm; its partitions: " in proc.stderr
    if slurm_cluster_is_private():
        assert "its partitions: debug (scontrol show partition)" in proc.stderr


@pytest.mark.cluster
@pytest.mark.slow
def test_status_says_why_a_job_waits_and_why_a_cell_gave_up(slurm, sandbox, tmp_path):
    # A cell that fails at once (MNIST is not in an empty data folder) with one attempt allowed ...
    (tmp_path / "empty").mkdir()
    sandbox.launch("mult=native", "dataset=mnist", f"data_dir={tmp_path / 'empty'}", "cluster.max_attempts=1",
                   "cluster.walltime=00:10:00")
    # ... beside two long training cells of a job array that runs one task at a time: the second one waits.
    sandbox.launch("mult=native", "seed=0,1", "train.epochs=300", "cluster.array_parallelism=1",
                   "cluster.walltime=00:10:00")
    # (The MNIST cell may itself be queued a moment, "waiting: Resources" on a 2-core machine: wait for the array's
    # reason, not for any.)
    rows = sandbox.wait(lambda rs: any(r["why"] == "waiting: JobArrayTaskLimit" for r in rs), timeout=150,
                        what="the array's second cell waiting with the scheduler's reason")
    (waiting,) = [r for r in rows if r["why"] == "waiting: JobArrayTaskLimit"]
    assert waiting["state"] == "queued" and waiting["dataset"] != "mnist", rows
    table = sandbox.module("orchestrator.cluster.status").stdout
    assert "waiting: JobArrayTaskLimit" in table and "| why" in table
    subprocess.run(["scancel", waiting["job_id"].split("_")[0]], check=True, timeout=60)

    rows = sandbox.wait(lambda rs: any(r["dataset"] == "mnist" and r["state"] == "failed" for r in rs), timeout=300,
                        what="the MNIST cell failed")
    (failed,) = [r for r in rows if r["dataset"] == "mnist"]
    assert failed["why"].startswith("gave up after 1 of cluster.max_attempts=1 attempts: MissingDatasetError: mnist: "
                                    "missing train-images-idx3-ubyte.gz"), failed["why"]
    resume = sandbox.module("orchestrator.cluster.resume", "--dry-run").stdout
    assert re.search(r"lenet300_native_mnist_s0_\w+: gave up: 1 of cluster.max_attempts=1 attempts used", resume), resume
