"""Helpers of the cluster tests: run `launch.py -m` into a sandbox, read its grid, wait for states, read MLflow."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Tiny cells: LeNet-300-100 on the bundled digits, one CPU and 2 GB per job.
TINY = ["model=lenet300", "dataset=digits", "cluster.cpus=1", "cluster.mem=2"]


class Sandbox:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_dir = root / "state"
        self.uri = f"sqlite:///{root / 'mlflow.db'}"

    def overrides(self, *extra: str) -> list[str]:
        cluster = [] if any(e.startswith("cluster=") for e in extra) else ["cluster=slurm"]
        return [*cluster, *TINY, f"checkpoint_root={self.root / 'ck'}", f"tracking_uri={self.uri}",
                f"cluster.state_dir={self.state_dir}", f"hydra.sweep.dir={self.root / 'sweep'}", *extra]

    def launch(self, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, str(REPO / "launch.py"), "-m", *self.overrides(*extra)],
                              cwd=self.root, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"launch failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        return proc

    def module(self, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", name, "--state-dir", str(self.state_dir), *args], cwd=REPO,
                              capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        return proc

    def rows(self) -> list[dict]:
        return json.loads(self.module("orchestrator.cluster.status", "--json").stdout or "[]")

    def records(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted((self.state_dir / "cells").glob("*.json"))]

    def wait(self, done, timeout: float, poll: float = 5.0, what: str = "the cells") -> list[dict]:
        deadline = time.time() + timeout
        rows = self.rows()
        while not done(rows):
            if time.time() > deadline:
                raise AssertionError(f"{what} did not get there in {timeout:.0f} s: {json.dumps(rows, indent=1)}")
            time.sleep(poll)
            rows = self.rows()
        return rows

    def wait_all(self, state: str, timeout: float) -> list[dict]:
        return self.wait(lambda rows: rows and all(r["state"] == state for r in rows), timeout,
                         what=f"all cells {state}")

    def wait_for_jobs(self, timeout: float, scheduler: str = "slurm") -> None:
        """Until the scheduler no longer has the cells' latest jobs queued or running (asked directly: `status` would
        import). A cell's done.json comes before its job's last work (the final archive copy, the run's end)."""
        from orchestrator.schedulers import job_status

        ids = [r["jobs"][-1]["id"] for r in self.records()]
        deadline = time.time() + timeout
        while any(job_status.alive(state) for state in job_status.job_states(scheduler, ids).values()):
            assert time.time() < deadline, f"jobs {ids} still queued or running after {timeout:.0f} s"
            time.sleep(3)

    def runs(self) -> list:
        """The cells' runs (not the experiment's summary run, which the resume cron adds when the grid is done)."""
        from mlflow.tracking import MlflowClient

        from orchestrator.tracking.tracker import TAG_CELL

        client = MlflowClient(self.uri)
        ids = [e.experiment_id for e in client.search_experiments()]
        return client.search_runs(ids, filter_string=f"tags.`{TAG_CELL}` != ''", max_results=1000)

    def finished_runs(self, count: int, timeout: float = 120) -> list:
        """The MLflow runs once `count` of them are FINISHED: a cell's done.json comes a moment before its job has
        sent the run's final status."""
        deadline = time.time() + timeout
        while True:
            runs = self.runs()
            if sum(r.info.status == "FINISHED" for r in runs) >= count or time.time() > deadline:
                return runs
            time.sleep(2)

    def epoch_steps(self, run_id: str) -> list[tuple[int, float]]:
        from mlflow.tracking import MlflowClient

        history = MlflowClient(self.uri).get_metric_history(run_id, "epoch")
        return sorted((m.step, m.value) for m in history)


def job_logs(sandbox: Sandbox) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((sandbox.root / "sweep").rglob("*_log.*")))
