"""Fixtures of the models tests: real MNIST loaded once (its files come from tests/conftest.py's `mnist_data_dir`)."""

import pytest


@pytest.fixture(scope="session")
def mnist(mnist_data_dir):
    from models.datasets import load

    return load("mnist", mnist_data_dir)
