"""A local sweep stopped with SIGTERM (`kill`, as a user or a session manager stops it) leaves its cell's run KILLED,
not RUNNING for ever; launched again, the cell resumes, its run reads RUNNING while it trains and FINISHED at the end,
with every epoch logged once."""
from __future__ import annotations

import signal
import time

from tests.dashboard.helpers import launch

# ~360 steps an epoch (digits at batch 4): long enough to stop it in the middle, short enough to finish quickly.
LONG = ["-m", "model=lenet300", "mult=native", "train.batch_size=4", "train.epochs=6"]


def _run(uri: str):
    """The cell's run (the experiment's report run, which the sweep adds at its end, is not one) and a client."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    try:
        exp = client.get_experiment_by_name("amdnn")
        runs = [] if exp is None else client.search_runs([exp.experiment_id], "tags.`amdnn.cell` != ''")
    except Exception:  # noqa: BLE001 - the store is being created by the cell
        return None, client
    return (runs[0] if runs else None), client


def _wait(what: str, condition, timeout: float = 240.0, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_sigterm_marks_the_run_killed_and_a_resume_marks_it_running_again(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sweep = launch(tmp_path, *LONG, popen=True)
    _wait("the first epoch in MLflow", lambda: (lambda r: r and r[0] and "epoch" in r[0].data.metrics)(_run(uri)))
    sweep.send_signal(signal.SIGTERM)
    output, _ = sweep.communicate(timeout=120)
    assert sweep.returncode == 128 + signal.SIGTERM, output[-3000:]
    run, client = _run(uri)
    assert run.info.status == "KILLED", output[-3000:]
    logged = [m.step for m in client.get_metric_history(run.info.run_id, "epoch")]
    assert 1 <= len(logged) < 6

    again = launch(tmp_path, *LONG, popen=True)
    _wait("the resumed run RUNNING", lambda: (lambda r: r[0] and r[0].info.status == "RUNNING")(_run(uri)))
    output, _ = again.communicate(timeout=300)
    assert again.returncode == 0, output[-3000:]
    assert "resumed from step-" in output
    run, client = _run(uri)
    assert run.info.status == "FINISHED"
    assert [m.value for m in sorted(client.get_metric_history(run.info.run_id, "epoch"), key=lambda m: m.step)] == \
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
