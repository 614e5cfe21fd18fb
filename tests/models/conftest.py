"""Fixtures of the models tests: the shared data folder and real MNIST, loaded once."""

import os
from pathlib import Path

import pytest


def shared_dir():
    """The shared/ folder beside the checkout (or $AMDNN_SHARED): real MNIST in shared/data/mnist."""
    return Path(os.environ.get("AMDNN_SHARED") or Path(__file__).resolve().parents[2].parent / "shared")


@pytest.fixture(scope="session")
def mnist_dir():
    folder = shared_dir() / "data" / "mnist"
    if not (folder / "train-images-idx3-ubyte.gz").is_file():
        pytest.fail(f"real MNIST files expected in {folder} (set AMDNN_SHARED to the shared/ folder)")
    return folder


@pytest.fixture(scope="session")
def mnist(mnist_dir):
    from models.datasets import load

    return load("mnist", mnist_dir.parent)
