"""A cell's configuration resolved once (config.cell): a typed, immutable CellConfig that round-trips through the
job's run-config.json exactly, refuses what validate refuses, and keeps the identity every existing cell has."""
import dataclasses
import pickle

import pytest

from orchestrator.common import paths
from orchestrator.config.cell import CellConfig, resolve
from orchestrator.config.identity import base_tags, cell_folder, cell_identity, defining_config
from orchestrator.config.keys import group_options
from orchestrator.config.validate import ConfigError, validate
from orchestrator.tracking.tracker import flatten

from tests.orchestrator.helpers import compose

PRESETS = [(), ("model=lenet5", "dataset=mnist"), ("model=resnet18", "dataset=cifar10", "mult=am32"),
           ("mult=native", "engine=torch", "seed=3"), ("train=cifar", "train.schedule.name=step")]


@pytest.mark.parametrize("model", group_options()["model"])
def test_identity_and_folder_are_the_old_ones_for_every_shipped_model(model):
    cfg = compose(f"model={model}")
    cell = resolve(cfg)
    assert cell.identity == cell_identity(cfg)
    assert cell.cell_dir == str(cell_folder(cfg))
    assert cell.defining_config() == defining_config(cfg)


@pytest.mark.parametrize("overrides", PRESETS)
def test_round_trip_through_json_and_pickle(overrides):
    cell = resolve(compose(*overrides))
    again = CellConfig.from_json(cell.to_json())
    assert again == cell and again.to_json() == cell.to_json()
    assert pickle.loads(pickle.dumps(cell)) == cell  # a cluster job's pickle holds it


def test_what_the_run_is_told_is_unchanged():
    cfg = compose("mult=am32", "train.optimizer.lr=0.01")
    cell, plain = resolve(cfg), validate(cfg)
    plain.pop("hydra", None)
    assert flatten(cell.as_dict()) == flatten(plain)  # the MLflow params
    tags, old = cell.tags(), base_tags(cell.identity, plain)
    assert {k: v for k, v in tags.items() if k != "amdnn.host"} == {k: v for k, v in old.items() if k != "amdnn.host"}


def test_resolved_values(tmp_path):
    table = tmp_path / "t.bin"
    cell = resolve(compose(f"data_dir={tmp_path}", "checkpoint_root=rel", "tracking_uri=sqlite:///m.db"))
    assert cell.paths.data_dir == str(tmp_path) and cell.paths.checkpoint_root == str(paths.checkpoint_root("rel"))
    assert cell.tracking.uri == paths.tracking_uri("sqlite:///m.db") and cell.tracking.uri.startswith("sqlite:////")
    assert cell.mult.spec == "am16" and cell.mult.simulated and not table.exists()
    assert isinstance(cell.train.optimizer.lr, float) and cell.train.epochs == 15 and cell.engine == "tensorflow"
    assert cell.gpus is None and resolve(compose("cluster=slurm")).gpus == 0


def test_immutable():
    cell = resolve(compose())
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.seed = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.train.optimizer.lr = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        cell.cluster["name"] = "elsewhere"  # type: ignore[index]
    with pytest.raises(TypeError):
        cell.composed["train"]["epochs"] = 1  # type: ignore[index]


def test_resolve_refuses_what_validate_refuses():
    bad = compose("train.epochs=0", "+x=1")
    with pytest.raises(ConfigError) as validated:
        validate(bad)
    with pytest.raises(ConfigError) as resolved:
        resolve(bad)
    assert str(resolved.value) == str(validated.value)
    assert "train.epochs=0 must be an integer >= 1" in str(resolved.value)


def test_from_json_refuses_another_format():
    with pytest.raises(ValueError, match="format"):
        CellConfig.from_json('{"format": 0}')


def test_a_job_reads_the_same_facts_from_a_job_cell_as_from_an_older_jobs_dict():
    from orchestrator.cluster.launcher import _JOB_FIELDS, JobCell

    cell = resolve(compose())
    facts = JobCell(cell, "/state", None, 60).facts()
    assert tuple(facts) == _JOB_FIELDS
    assert (facts["identity"], facts["tracking_uri"]) == (cell.identity, cell.tracking.uri)
