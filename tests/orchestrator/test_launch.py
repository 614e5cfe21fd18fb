"""launch.py end to end, in subprocesses as a user runs it: the default cell, a local sweep and its table, a re-run
that trains nothing, a failed cell inside a sweep, and invalid configs refused before anything trains."""
from __future__ import annotations

import re
import subprocess

from orch_helpers import PYTHON, REPO, env


def launch(tmp_path, *args: str, timeout: int = 400) -> subprocess.CompletedProcess:
    overrides = [f"checkpoint_root={tmp_path / 'ck'}", f"tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"]
    return subprocess.run([PYTHON, str(REPO / "launch.py"), *args, *overrides], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=timeout)


def test_default_launch_reaches_90_percent_on_digits_under_am16(tmp_path):
    proc = launch(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "lenet300/am16/digits s0 epoch 15/15" in out  # one line per epoch: stdout is not a terminal
    accuracy = float(re.search(r"lenet300_am16_digits_s0_\w+: finished; final test accuracy ([\d.]+)", out)[1])
    assert accuracy >= 0.90
    assert f"mlflow ui --backend-store-uri sqlite:///{tmp_path / 'mlflow.db'}" in out


def _table(out: str) -> str:
    return "\n".join(l for l in out.splitlines() if l.startswith("|"))


def test_sweep_prints_table_and_rerun_trains_nothing(tmp_path):
    args = ["-m", "model=lenet300,lenet5", "mult=native,am16", "train.epochs=1", "train.batch_size=32"]
    first = launch(tmp_path, *args)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-3000:]
    table = _table(out)
    assert table.splitlines()[0] == "| Final test accuracy (digits) | native | am16 |"
    rows = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[2:4]] for l in table.splitlines()[2:]}
    assert set(rows) == {"lenet300", "lenet5"}
    assert all(re.fullmatch(r"0\.\d{4}", c) for cells in rows.values() for c in cells), table
    again = launch(tmp_path, *args)
    out2 = again.stdout + again.stderr
    assert again.returncode == 0, out2[-3000:]
    assert out2.count("already finished, nothing trained") == 4 and "epoch 1/1" not in out2
    assert _table(out2) == table


def test_failed_cell_does_not_stop_the_sweep(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = launch(tmp_path, "-m", "mult=native", "dataset=mnist,digits", f"data_dir={tmp_path / 'empty'}",
                  "train.epochs=1", "train.batch_size=32")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert re.search(r"lenet300_native_mnist_s0_\w+: failed", out) and "mnist" in out
    assert re.search(r"lenet300_native_digits_s0_\w+: finished", out)
    assert "| lenet300 | failed |" in out and re.search(r"\| lenet300 \| 0\.\d{4} \|", out)


def test_invalid_sweep_is_refused_before_anything_trains(tmp_path):
    proc = launch(tmp_path, "-m", "mult=native,am16", "train.epochs=1,0")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "train.epochs=0 must be an integer >= 1" in out and "sweep cell" in out
    assert not (tmp_path / "ck").exists()


def test_invalid_single_run_names_valid_choices(tmp_path):
    proc = launch(tmp_path, "mult=lut", f"mult.table={tmp_path / 'nope.bin'}")
    assert proc.returncode != 0 and "is not a readable file" in proc.stdout + proc.stderr
    proc = launch(tmp_path, "model=vgg16")
    assert proc.returncode != 0 and "lenet300" in proc.stdout + proc.stderr
    assert not (tmp_path / "ck").exists()
