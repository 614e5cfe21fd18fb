"""The acceptance run of issue 3 on real data: LeNet-5 under am16 for one epoch on the real MNIST files in shared/
reaches >= 0.95 test accuracy, through launch.py as a user runs it (every multiply, forward and backward, simulated)."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from test_launch import launch

SHARED_DATA = Path(os.environ.get("AMDNN_SHARED", Path(__file__).resolve().parents[2].parent / "shared")) / "data"


@pytest.mark.slow
def test_lenet5_am16_one_epoch_on_real_mnist(tmp_path):
    if not (SHARED_DATA / "mnist" / "train-images-idx3-ubyte.gz").exists():
        pytest.fail(f"the real MNIST files are missing from {SHARED_DATA / 'mnist'} (shared/data of the project)")
    proc = launch(tmp_path, "model=lenet5", "mult=am16", "dataset=mnist", f"data_dir={SHARED_DATA}",
                  "train.epochs=1", "train.batch_size=32", "train.optimizer.lr=0.05", timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    accuracy = float(re.search(r"lenet5_am16_mnist_s0_\w+: finished; final test accuracy ([\d.]+)", out)[1])
    assert accuracy >= 0.95, out[-2000:]
