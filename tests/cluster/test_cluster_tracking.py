"""Tracking of a Slurm grid (the session's real Slurm): in single-writer mode the jobs never open the SQLite store and
`status` and `report` import what they queued; with an MLflow server started here the jobs send to it directly."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.cluster.helpers import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

GRID = ["mult=native", "seed=0,1", "train.epochs=2", "cluster.walltime=00:10:00"]

# Armed in every Python process of a Slurm job (SLURM_JOB_ID set): opening the store (the .db file or its journal,
# by open() or by sqlite3) is written down and refused. The line "armed" proves the hook ran in the jobs.
STORE_GUARD = """
import os, sys
if os.environ.get("SLURM_JOB_ID") and os.environ.get("AMDNN_GUARDED_STORE"):
    _store, _log = os.environ["AMDNN_GUARDED_STORE"], os.environ["AMDNN_GUARD_LOG"]
    def _note(line):
        with open(_log, "a") as f:
            f.write(line + "\\n")
    _note(f"armed {os.getpid()} job {os.environ['SLURM_JOB_ID']}")
    def _guard(event, args):
        if event not in ("open", "sqlite3.connect") or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        path = os.fsdecode(args[0])
        if path == _store or path.startswith(_store + "-") or event == "sqlite3.connect" and _store in path:
            _note(f"opened {path} ({event}) pid {os.getpid()}")
            raise PermissionError(f"a job opened the tracking store {path}")
    sys.addaudithook(_guard)
"""


def _assert_two_cells_in_store(sandbox, report_uri: str) -> None:
    runs = sandbox.finished_runs(2, timeout=30)
    assert sorted(r.info.status for r in runs) == ["FINISHED"] * 2
    for run in runs:
        steps = sandbox.epoch_steps(run.info.run_id)
        assert [v for _, v in steps] == [1.0, 2.0] and len({s for s, _ in steps}) == 2, steps  # every epoch once
    rows = sandbox.rows()
    assert [(r["state"], r["epoch"]) for r in rows] == [("finished", 2)] * 2
    report = subprocess.run([sys.executable, "-m", "orchestrator.report", "--tracking-uri", report_uri,
                             "--out", str(sandbox.root / "report")], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0 and "(n=2)" in report.stdout, report.stdout + report.stderr  # seeds 0 and 1


def test_single_writer_grid_jobs_never_open_the_store(slurm, sandbox, tmp_path, monkeypatch):
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(STORE_GUARD)
    log = tmp_path / "store-opens.log"
    db = sandbox.root / "mlflow.db"
    monkeypatch.setenv("PYTHONPATH", f"{guard}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("AMDNN_GUARDED_STORE", str(db))
    monkeypatch.setenv("AMDNN_GUARD_LOG", str(log))

    out = sandbox.launch(*GRID, "tracking_mode=single_writer")
    assert "tracking: SQLite store on" in out.stdout and "tracking_mode=single_writer" in out.stdout, out.stdout
    sandbox.wait_for_jobs(timeout=480)
    assert len(list((sandbox.root / "ck").glob("*/done.json"))) == 2
    lines = log.read_text().splitlines()
    assert sum(line.startswith("armed") for line in lines) >= 4, lines  # each job: its own process and the worker's
    assert not [line for line in lines if line.startswith("opened")], lines
    assert sandbox.runs() == []  # nothing in the store yet: the jobs only queued

    status = sandbox.module("orchestrator.cluster.status").stdout  # imports first
    assert "tracking: 2 single-writer queue(s)" in status and ", 0 wait" in status, status
    _assert_two_cells_in_store(sandbox, sandbox.uri)
    jobs = sorted(r["jobs"][-1]["id"] for r in sandbox.records())
    assert sorted(r.data.tags["amdnn.job_ids"] for r in sandbox.runs()) == jobs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_grid_with_a_tracking_server_sends_directly(slurm, sandbox, tmp_path):
    port = _free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    server = subprocess.Popen([str(mlflow), "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              stdout=open(tmp_path / "server.log", "w"), stderr=subprocess.STDOUT,
                              # no job runners: eight more processes importing MLflow, for jobs no test asks of it
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                              cwd=tmp_path, start_new_session=True)  # its ./mlartifacts in tmp_path, not the repo
    try:
        deadline = time.time() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None and time.time() < deadline, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(1)
        sandbox.uri = f"http://127.0.0.1:{port}"
        out = sandbox.launch(*GRID)
        assert "is not an SQLite file: every cell sends to it itself" in out.stdout, out.stdout
        sandbox.wait_all("finished", timeout=480)
        _assert_two_cells_in_store(sandbox, sandbox.uri)
        assert not list(tmp_path.rglob("*.queues"))  # no register: nothing for an importer
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
