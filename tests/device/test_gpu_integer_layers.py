"""The integer layers on a GPU (Keras' torch backend on cuda:0): tests/models/integer_probe.py, run there, gives the
numpy reference's bits (ops/modes/integer_reference.py) for the forward, the running range and the gradients
through the table (their sums are exact integers, so the GPU's op on codes and the CPU's agree bit for bit; the
filter gradient of 36,000 taps goes in the GPU's slices of 8,192), and the straight-through gradients up to the
order of fp32 sums: the checks of tests/models/test_integer_layers.py (tests/models/integer_checks.py). Needs torch
with CUDA and a GPU (not part of CI): `bash tests/device/run_on_gpu.sh -k integer_layers`, with keras on PYTHONPATH.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.models.integer_checks import LUTS, check_conv_training_steps, check_table_gradients

if not torch.cuda.is_available():
    pytest.fail("tests/device needs a CUDA GPU (run them on the GPU machine with tests/device/run_on_gpu.sh)",
                pytrace=False)

REPO = LUTS.parents[2]


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict[str, np.ndarray]:
    out = tmp_path_factory.mktemp("gpu") / "probe.npz"
    env = {**os.environ, "KERAS_BACKEND": "torch"}
    result = subprocess.run([sys.executable, "-m", "tests.models.integer_probe", str(LUTS), str(out)], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    with np.load(out) as data:
        return {key: data[key] for key in data.files}


def test_the_integer_layers_on_the_gpu_follow_the_reference(probe):
    check_conv_training_steps(probe)


def test_gradients_through_the_table_on_the_gpu_are_the_references_bits(probe):
    check_table_gradients(probe)
