"""A local sweep side by side on GPUs, on this CPU-only machine with fake GPU ids.

First the runner (sweep/parallel) with stand-in processes that record what they saw: at most floor(ids / per cell) at
once, each with its own CUDA_VISIBLE_DEVICES, a failure stopping nothing, Ctrl-C forwarded once to every running
process and none started after it. Then launch.py end to end: real LeNet cells on the bundled digits.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.common import cellfiles
from orchestrator.sweep.gpu_pool import FAKE_IDS_VARIABLE, GpuPool
from orchestrator.sweep.local_launcher import JOB_RESULT
from orchestrator.sweep.parallel import Job, run_jobs
from tests.orchestrator.helpers import REPO, env, launch

# A stand-in cell: records its CUDA_VISIBLE_DEVICES, start and end, and the signals it got; exits with argv[3]. Its
# "checkpoint" on a stop signal takes argv[4] seconds (0.2 unless given).
STAND_IN = r"""
import json, os, signal, sys, time
record, seconds, code = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
checkpoint_s = float(sys.argv[4]) if len(sys.argv) > 4 else 0.2
got = []
signal.signal(signal.SIGINT, lambda s, f: got.append("SIGINT"))
signal.signal(signal.SIGTERM, lambda s, f: got.append("SIGTERM"))
t0 = time.time()
open(record + ".started", "w").close()
while time.time() < t0 + seconds and not got:
    time.sleep(0.02)
time.sleep(checkpoint_s)  # a second signal, if one were sent, would arrive here
json.dump({"gpus": os.environ["CUDA_VISIBLE_DEVICES"], "start": t0, "end": time.time(), "signals": got},
          open(record, "w"))
sys.exit(130 if got else code)
"""


def _stand_ins(tmp_path: Path, seconds: float, codes: list[int], checkpoint_s: float = 0.2) -> list[Job]:
    return [Job(i, f"cell {i}", [sys.executable, "-c", STAND_IN, str(tmp_path / f"{i}.json"), str(seconds), str(c),
                                 str(checkpoint_s)], tmp_path / f"{i}.log") for i, c in enumerate(codes)]


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _overlapping_have_distinct_gpus(records: list[dict]) -> bool:
    return all(a["gpus"] != b["gpus"] for i, a in enumerate(records) for b in records[i + 1:]
               if a["start"] < b["end"] and b["start"] < a["end"])


def test_at_most_n_at_once_each_on_its_own_gpus_and_a_failure_stops_nothing(tmp_path, capsys):
    jobs = _stand_ins(tmp_path, 0.6, [0, 3, 0, 0, 0])  # cell 1 fails
    outcomes = run_jobs(jobs, GpuPool(("f0", "f1", "f2", "f3"), 2), poll_s=0.02)
    records = [json.loads((tmp_path / f"{i}.json").read_text()) for i in range(5)]  # every cell ran
    assert [o.returncode for o in outcomes] == [0, 3, 0, 0, 0]
    assert {r["gpus"] for r in records} <= {"f0,f1", "f2,f3"} and [r["gpus"] for r in records[:2]] == ["f0,f1", "f2,f3"]
    assert _most_at_once([(r["start"], r["end"]) for r in records]) == 2
    assert _overlapping_have_distinct_gpus(records)
    out = capsys.readouterr().out
    assert "[amdnn] sweep: 5 of 5 done (4 finished, 1 failed), 0 running, 0 waiting" in out
    assert "[amdnn] cell 1: exit status 3" in out


DRIVER = r"""
import sys
from pathlib import Path
from orchestrator.sweep.gpu_pool import GpuPool
from orchestrator.sweep.parallel import Stopped, run_jobs
from tests.orchestrator.test_parallel_sweep import _stand_ins
try:
    run_jobs(_stand_ins(Path(sys.argv[1]), 60, [0, 0, 0], float(sys.argv[2])), GpuPool(("f0", "f1"), 1), poll_s=0.02)
except Stopped as stop:
    print(f"stopped after the cells stopped: {stop.code}", flush=True)
    raise
"""


def _driver(tmp_path: Path, checkpoint_s: float = 0.2) -> subprocess.Popen:
    """run_jobs over three stand-ins on two fake GPUs, in a process of its own, once the first two have started."""
    # SIGINT as a terminal gives it: a test run started in the background (CI) would hand its children SIGINT ignored
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path), str(checkpoint_s)], cwd=REPO, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 30
    while not ((tmp_path / "0.json.started").exists() and (tmp_path / "1.json.started").exists()):
        assert time.time() < deadline and driver.poll() is None, driver.communicate()[0]
        time.sleep(0.05)
    return driver


def test_ctrl_c_reaches_every_running_cell_once_and_starts_no_other(tmp_path):
    driver = _driver(tmp_path)
    driver.send_signal(signal.SIGINT)  # to the launcher alone: the cells run in sessions of their own
    out = driver.communicate(timeout=30)[0]
    assert driver.returncode == 130, out
    assert "stopping 2 running cell(s) at their next checkpoint" in out
    assert "stopped after the cells stopped: 130" in out
    for i in (0, 1):
        assert json.loads((tmp_path / f"{i}.json").read_text())["signals"] == ["SIGINT"]
    assert not (tmp_path / "2.json.started").exists()
    assert "[amdnn] cell 0: stopped (exit status 130)" in out and "[amdnn] cell 2: not started" in out
    assert "Traceback" not in out


def test_sigterm_stops_every_running_cell_and_says_how_each_ended(tmp_path):
    driver = _driver(tmp_path)
    driver.send_signal(signal.SIGTERM)
    out = driver.communicate(timeout=30)[0]
    assert driver.returncode == 128 + signal.SIGTERM, out
    assert "SIGTERM: stopping 2 running cell(s)" in out and "[amdnn] cell 1: stopped (exit status 130)" in out
    for i in (0, 1):
        assert json.loads((tmp_path / f"{i}.json").read_text())["signals"] == ["SIGTERM"]
    assert "Traceback" not in out


def test_a_second_ctrl_c_kills_the_cells_without_a_traceback_and_a_doubled_one_does_not(tmp_path):
    """`timeout -s INT` sends SIGINT to the launcher and to its process group: one stop delivered twice, which must
    stop the cells at their checkpoint; a Ctrl-C pressed again later kills them. Neither leaves a traceback."""
    doubled = _driver(tmp_path / "doubled", checkpoint_s=2.0)
    doubled.send_signal(signal.SIGINT)
    doubled.send_signal(signal.SIGINT)
    out = doubled.communicate(timeout=30)[0]
    assert doubled.returncode == 130 and "killing" not in out and "Traceback" not in out, out
    assert all(json.loads((tmp_path / "doubled" / f"{i}.json").read_text())["signals"] for i in (0, 1))

    again = _driver(tmp_path / "again", checkpoint_s=30.0)
    again.send_signal(signal.SIGINT)
    time.sleep(1.5)
    t0 = time.time()
    again.send_signal(signal.SIGINT)
    out = again.communicate(timeout=30)[0]
    assert time.time() - t0 < 10 and again.returncode == 130, out
    assert "SIGINT again: killing" in out and "[amdnn] cell 0: killed" in out and "Traceback" not in out, out
    assert not any((tmp_path / "again" / f"{i}.json").exists() for i in (0, 1))  # killed before their "checkpoint"


@pytest.mark.slow
def test_launch_runs_cells_side_by_side_on_fake_gpus_and_a_rerun_trains_nothing(tmp_path):
    """`launch.py -m` with two fake GPU ids (AMDNN_FAKE_GPU_IDS=f0,f1) and four cells: LeNet-300-100 x {native, am16}
    on digits (which train) and on an MNIST with no files (which fail in their training process).

    The fake ids go through discovery, placement and each cell process's CUDA_VISIBLE_DEVICES exactly as real ids
    would; only the cell is told that it asked for no GPU (cluster.gpus=0 in its own config), because a cell that asks
    for GPUs and sees none is rightly refused (GPU or nothing), and this machine has none: its training process then
    hides the fake ids and trains on the CPU. Each cell process records the CUDA_VISIBLE_DEVICES it was given and when
    it ran (.cell-job.json in its job folder); the training processes' events.jsonl give the same overlap from inside
    the cells. tracking_mode=single_writer keeps MLflow out of the cell processes (the launcher imports their records
    at the end), which keeps this test under a minute and a half on two cores.
    """
    (tmp_path / "empty").mkdir()
    environment = {**env(), FAKE_IDS_VARIABLE: "f0,f1"}
    common = [f"data_dir={tmp_path / 'empty'}", "train.epochs=1", "train.batch_size=32", "tracking_mode=single_writer",
              "mult=native,am16"]
    first = launch(tmp_path, "-m", "dataset=digits,mnist", *common, f"hydra.sweep.dir={tmp_path / 'sweep1'}",
                   environment=environment)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-4000:]
    assert "4 cell(s) on GPUs f0,f1" in out and "2 at once" in out
    records = [cellfiles.read_json(p) for p in sorted((tmp_path / "sweep1").glob(f"*/{JOB_RESULT}"))]
    assert len(records) == 4 and all(r["status"] == "completed" for r in records), records
    assert sorted(r["cuda_visible_devices"] for r in records) == ["f0", "f0", "f1", "f1"]
    for r in records:
        r["gpus"], r["start"], r["end"] = r["cuda_visible_devices"], r["started"], r["ended"]
    assert _most_at_once([(r["start"], r["end"]) for r in records]) == 2
    assert _overlapping_have_distinct_gpus(records)
    statuses = {r["return_value"]["name"].split("_s0_")[0]: r["return_value"]["status"] for r in records}
    assert statuses == {"lenet300_native_digits": "finished", "lenet300_am16_digits": "finished",
                        "lenet300_native_mnist": "failed", "lenet300_am16_mnist": "failed"}
    cells = sorted((tmp_path / "ck").iterdir())
    spans = []
    for cell in cells:
        events = cellfiles.events(cell)
        spans.append((events[0]["time"], events[-1]["time"]))
        assert events[-1]["event"] in ("finished", "failed")
    assert _most_at_once(spans) <= 2
    assert "| lenet300 | failed | failed |" in out and "[amdnn] sweep: 4 of 4 done (2 finished, 2 failed)" in out

    again = launch(tmp_path, "-m", "dataset=digits", *common, f"hydra.sweep.dir={tmp_path / 'sweep2'}",
                   environment=environment)
    out2 = again.stdout + again.stderr
    assert again.returncode == 0, out2[-4000:]
    assert out2.count("already finished, nothing trained") == 2
    logs = "".join(p.read_text() for p in (tmp_path / "sweep2").glob("*/cell.log"))
    assert "epoch 1/1" not in logs + out2
    for cell in cells:
        if "digits" in cell.name:
            assert [e["event"] for e in cellfiles.events(cell)] == ["start", "finished"]
