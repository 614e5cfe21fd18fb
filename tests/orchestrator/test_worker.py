"""How the training process answers: only a config error (and the other errors retrying cannot fix: missing data, a
checkpoint of another cell) is refused for good; any other exception is a crash, which run_cell retries."""
from __future__ import annotations

import pytest

from tests.orchestrator.helpers import TINY


@pytest.fixture
def training_raises(monkeypatch):
    from orchestrator.cell import trainer

    def install(error: BaseException):
        def train(*args, **kwargs):
            raise error

        monkeypatch.setattr(trainer, "train", train)

    return install


def test_a_config_error_in_training_is_refused(workdir, training_raises):
    from orchestrator.cell.run import run_cell
    from orchestrator.config.validate import ConfigError

    training_raises(ConfigError("resnet18 needs inputs of at least 32x32"))
    result = run_cell(workdir.cfg(*TINY), supervise=False)
    assert (result.status, result.attempts) == ("failed", 1)
    assert result.error == "ConfigError: resnet18 needs inputs of at least 32x32"


def test_a_value_error_in_training_is_a_crash_not_a_refusal(workdir, training_raises):
    from orchestrator.cell.run import run_cell

    training_raises(ValueError("an index out of range in a bug"))
    # Not answered as refused: the exception comes through, which in the worker process main() turns into exit
    # status 1, a crash that run_cell retries from the last checkpoint.
    with pytest.raises(ValueError, match="a bug"):
        run_cell(workdir.cfg(*TINY), supervise=False)
