"""The acceptance run of issue 3 on real data: LeNet-5 under am16 for one epoch on the real MNIST files (fixture
`mnist_data_dir` of tests/conftest.py) reaches >= 0.95 test accuracy, through launch.py as a user runs it (every
multiply, forward and backward, simulated)."""
from __future__ import annotations

import re

import pytest

from test_launch import launch


@pytest.mark.slow
def test_lenet5_am16_one_epoch_on_real_mnist(tmp_path, mnist_data_dir):
    proc = launch(tmp_path, "model=lenet5", "mult=am16", "dataset=mnist", f"data_dir={mnist_data_dir}",
                  "train.epochs=1", "train.batch_size=32", "train.optimizer.lr=0.05", timeout=1800)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    accuracy = float(re.search(r"lenet5_am16_mnist_s0_\w+: finished; final test accuracy ([\d.]+)", out)[1])
    assert accuracy >= 0.95, out[-2000:]
