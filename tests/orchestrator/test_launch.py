"""launch.py end to end, in subprocesses as a user runs it: the default cell, a local sweep and its table, a re-run
that trains nothing, a failed cell inside a sweep, invalid configs refused before anything trains, and a cluster
preset without -m submitted as a sweep of one rather than trained here."""
from __future__ import annotations

import os
import re

import pytest

from tests.orchestrator.helpers import env, launch


def test_default_launch_reaches_90_percent_on_digits_under_am16(tmp_path):
    proc = launch(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "lenet300/am16/digits s0 epoch 15/15" in out  # one line per epoch: stdout is not a terminal
    accuracy = float(re.search(r"lenet300_am16_digits_s0_\w+: finished; final test accuracy ([\d.]+)", out)[1])
    assert accuracy >= 0.90
    assert f"mlflow ui --backend-store-uri sqlite:///{tmp_path / 'mlflow.db'}" in out


def _table(out: str, title: str = "Final test accuracy") -> str:
    """The markdown table of `out` whose header starts with `title`."""
    lines = out.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(f"| {title}"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


@pytest.mark.slow
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
    # each model's am16 against its own native, one seed: the difference without an interval
    compared = _table(out, "Against the baseline").splitlines()[2:]
    assert [re.sub(r"[+-]\d+\.\d\d pp", "D", l) for l in compared] == [
        "| lenet300 × am16 | native | D (n=1) | 0 |", "| lenet5 × am16 | native | D (n=1) | 0 |"]
    again = launch(tmp_path, *args)
    out2 = again.stdout + again.stderr
    assert again.returncode == 0, out2[-3000:]
    assert out2.count("already finished, nothing trained") == 4 and "epoch 1/1" not in out2
    assert _table(out2) == table and _table(out2, "Against the baseline") == _table(out, "Against the baseline")


@pytest.mark.slow
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


@pytest.mark.parametrize("args, expected", [
    (["mult=lut", "mult.table=/etc/passwd"], "mult.table='/etc/passwd': table file '/etc/passwd' has"),
    (["mult=lut", "mult.table=nope.bin"], "mult.table='nope.bin' is not a readable file"),
    (["train.epoch=3"], "train.epoch is not a config key; did you mean train.epochs?"),
    (["+x=1"], "x is not a config key; the top-level keys are: checkpoint,"),
    (["model=vgg16"], "model=vgg16 is not an option of model: lenet300, lenet5, resnet18, resnet34, resnet50"),
    (["-m", "model=lenet5,resnet17"], "model=resnet17 is not an option of model: lenet300, lenet5, resnet18"),
    (["dataset=mnist", "dataset.augment=true"], "mnist has no usual augmentation; datasets with one: cifar10"),
    (["model=lenet5", "cluster=slurm", "cluster.walltime=abc"], "walltime 'abc': expected 'HH:MM:SS'"),
    (["-m", "model=lenet5", "cluster=slurm", "cluster.walltime=abc"], "walltime 'abc': expected 'HH:MM:SS'"),
])
def test_config_errors_are_one_message_and_exit_2(tmp_path, args, expected):
    proc = launch(tmp_path, *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert expected in out and "Traceback" not in out and "HYDRA_FULL_ERROR" not in out, out[-3000:]
    assert not (tmp_path / "ck").exists()


FAKE_SBATCH = """#!/bin/sh
# Answers as sbatch does and keeps the job script: nothing reaches a real Slurm.
for arg; do script=$arg; done
cp "$script" "$(dirname "$0")/job-$(ls "$(dirname "$0")" | wc -l).sh"
echo "Submitted batch job 4242"
"""


# sbatch is faked here, but scontrol and sinfo answer from the suite's real test Slurm when it runs (a 2-core node),
# and the launch refuses requests no node can run: ask for what it has.
FITS_THE_TEST_SLURM = ("cluster.cpus=1", "cluster.mem=1")


def fake_slurm_env(tmp_path) -> dict:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    e = env()
    e["PATH"] = f"{bin_dir}{os.pathsep}{e['PATH']}"
    return e


def test_cluster_preset_without_m_submits_the_cell_and_trains_nothing_here(tmp_path):
    proc = launch(tmp_path, "model=lenet5", "cluster=slurm", "cluster.walltime=00:10:00", *FITS_THE_TEST_SLURM,
                  f"cluster.state_dir={tmp_path / 'state'}", environment=fake_slurm_env(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "submitting this cell as a sweep of one, as `python " in out and " -m model=lenet5 cluster=slurm" in out
    assert "[amdnn] 1 cell(s) submitted to slurm" in out and "lenet5 x am16 (digits, seed 0) -> job 4242" in out
    assert "| lenet5 | not started |" in out  # the sweep's table: the cell is queued, no result here
    assert "Covers this sweep's 1 cell(s) of experiment amdnn: 1 not started." in out
    assert "epoch 1/" not in out and not (tmp_path / "ck").exists()
    scripts = sorted((tmp_path / "fake-bin").glob("job-*.sh"))
    assert len(scripts) == 1 and "#SBATCH --time=10\n" in scripts[0].read_text()


def test_cluster_sweep_table_has_a_column_per_experiment_before_any_result(tmp_path):
    proc = launch(tmp_path, "-m", "cluster=slurm", "mult.exact_gradients=false,true", *FITS_THE_TEST_SLURM,
                  f"cluster.state_dir={tmp_path / 'state'}", environment=fake_slurm_env(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "[amdnn] 2 cell(s) submitted to slurm" in out
    assert "| Final test accuracy (digits) | am16 mult.exact_gradients=false | am16 mult.exact_gradients=true |\n" \
           "|---|---|---|\n| lenet300 | not started | not started |" in out
