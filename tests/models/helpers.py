"""Helpers shared by the models tests, imported as tests.models.helpers: small datasets whose batches reveal their
example indices, and a Python process under a chosen Keras backend."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from models.datasets import Dataset

ROOT = Path(__file__).resolve().parents[2]


def run_python(backend: str, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """python ARGS from the repository's root under KERAS_BACKEND=backend, with no GPU (this checkout's ops and
    models first on the path)."""
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def indexed_dataset(n=103, name="indexed", shape=(2, 2, 1)):
    """A dataset whose example i is the constant image i / n with label i % 10: batches reveal their indices."""
    values = np.arange(n, dtype=np.float32) / n
    x = np.broadcast_to(values[:, None, None, None], (n, *shape)).astype(np.float32)
    y = (np.arange(n) % 10).astype(np.int64)
    return Dataset(name=name, x_train=x, y_train=y, x_test=x[:5], y_test=y[:5], num_classes=10, input_shape=shape)


def indices_of(x, n):
    """The example indices of a batch of indexed_dataset(n)."""
    return np.rint(x[:, 0, 0, 0] * n).astype(int)
