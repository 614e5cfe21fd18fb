"""Config: conf/ groups mirror the registries; invalid values fail before training naming the valid choices;
the cell identity depends on exactly the keys that define a run."""
from __future__ import annotations

import pytest

from orchestrator.config.validate import ConfigError, validate
from orchestrator.config.identity import cell_identity, cell_name
from tests.orchestrator.helpers import REPO, compose


def _options(group: str) -> set[str]:
    return {p.stem for p in (REPO / "conf" / group).glob("*.yaml") if not p.stem.startswith("_")}


def test_groups_equal_registries():
    import models
    import ops
    from ops.modes.multipliers import integer_names
    from models import datasets

    from models import optim

    assert _options("model") == set(models.names())
    assert _options("mult") == set(ops.names(include_native=True)) | {"lut"} | set(integer_names())
    assert _options("dataset") == set(datasets.DATASETS)
    cfg = compose()
    assert cfg.train.optimizer.name in optim.OPTIMIZERS and cfg.train.schedule.name in optim.SCHEDULES
    for group in ("model", "mult", "dataset"):
        for option in _options(group) - {"lut"}:
            assert compose(f"{group}={option}")[group].name == option


def test_default_config_is_valid_and_is_the_default_cell():
    c = validate(compose())
    assert (c["model"]["name"], c["mult"]["name"], c["dataset"]["name"]) == ("lenet300", "am16", "digits")
    assert c["cluster"]["name"] == "local"


@pytest.mark.parametrize("overrides, expected", [
    ("model.name=vgg16", "lenet300, lenet5, resnet18"),
    ("mult.name=am8", "native, acc32"),
    ("dataset.name=imagenet", "digits, mnist"),
    ("train.epochs=0", "train.epochs=0 must be an integer >= 1"),
    ("train.optimizer.name=rmsprop", "adam, sgd"),
    ("train.optimizer.lr=-1", "must be a number > 0"),
    ("mult=lut", "needs a table file"),
    ("mult=int8 mult.table=nope.int8s.npy", "mult.table='nope.int8s.npy' is not a readable file (an integer table"),
    ("mult=uint8 mult.table=ops/luts/evoapprox/mul8s_1L2H.int8s.npy", "is a signed table; uint8 takes a unsigned one"),
    ("train.calibration_batches=-1", "train.calibration_batches=-1 must be an integer >= 0"),
    ("mult=am16 mult.table_gradients=true", "mult.table_gradients=true applies to the integer modes"),
    ("mult=int8 mult.table_gradients=true mult.exact_gradients=true", "contradict each other"),
    ("mult=int8 mult.table_gradients=yes", "mult.table_gradients='yes' must be true or false"),
    ("+x=1", "x is not a config key; the top-level keys are: checkpoint, checkpoint_root, cluster, data_dir"),
    ("+train.epoch=3", "train.epoch is not a config key; did you mean train.epochs?"),
    ("+mult.exact_gradient=true", "mult.exact_gradient is not a config key; did you mean mult.exact_gradients?"),
    ("+train.optimizer.learning_rate=0.1",
     "train.optimizer.learning_rate is not a config key; the keys of train.optimizer are: lr, momentum, name"),
    ("dataset.augment=true", "dataset.augment=true but digits has no usual augmentation; datasets with one: cifar10"),
    ("dataset=mnist dataset.augment=true", "mnist has no usual augmentation; datasets with one: cifar10"),
    ("dataset.augment=1", "dataset.augment=1 must be true or false"),
    ("system_metrics=sometimes", "system_metrics='sometimes' must be true or false"),
    ("cluster=slurm cluster.walltime=abc", "cluster.walltime: walltime 'abc': expected 'HH:MM:SS'"),
    ("cluster=pbs cluster.walltime=01:75:00", "minutes and seconds must be below 60"),
    ("cluster=slurm cluster.cpus=-2", "cluster.cpus: cpus -2: expected a whole number >= 0"),
    ("cluster=slurm cluster.max_requeues=-1", "cluster.max_requeues=-1 must be an integer >= 0"),
    ("cluster=gadi", "cluster=gadi needs cluster.project"),
])
def test_validation_names_what_is_valid(overrides, expected, monkeypatch):
    monkeypatch.delenv("PROJECT", raising=False)  # gadi's project defaults to $PROJECT
    with pytest.raises(ConfigError) as info:
        validate(compose(*overrides.split()))
    assert expected in str(info.value)


def test_every_problem_is_named_at_once():
    with pytest.raises(ConfigError) as info:
        validate(compose("+x=1", "train.epochs=0", "dataset=mnist", "dataset.augment=true"))
    problems = str(info.value).splitlines()[1:]
    assert len(problems) == 3 and problems[0].startswith("  - x is not a config key")


@pytest.mark.parametrize("overrides", [
    (), ("cluster=slurm",), ("cluster=pbs",), ("cluster=gadi", "cluster.project=ab12"),
    ("cluster=slurm", "+cluster.env.OMP_NUM_THREADS=4"),  # cluster.env is the user's mapping: any name
    ("dataset=cifar10", "model=resnet18", "train=cifar"), ("dataset=cifar10", "dataset.augment=false"),
    ("mult=uint8", "mult.table_gradients=true"), ("mult=int8", "mult.table_gradients=true"),  # either scheme
])
def test_shipped_presets_are_valid(overrides):
    c = validate(compose(*overrides))
    assert c["cluster"]["name"] == next((o.split("=")[1] for o in overrides if o.startswith("cluster=")), "local")


def test_unreadable_table(tmp_path):
    with pytest.raises(ConfigError, match="not a readable file"):
        validate(compose("mult=lut", f"mult.table={tmp_path / 'missing.bin'}"))
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not a table")
    with pytest.raises(ConfigError, match="mult.table="):
        validate(compose("mult=lut", f"mult.table={bad}"))


def test_unknown_group_option_fails_at_composition():
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException, match="lenet300"):
        compose("model=vgg16")


def test_identity_depends_on_the_run_not_on_where_it_runs(tmp_path):
    base = cell_identity(compose())
    assert base == cell_identity(compose("checkpoint_root=/elsewhere", "tracking_uri=http://h:5000",
                                         "data_dir=/d", "checkpoint.every_n_steps=5", "retries.crashes=9",
                                         "experiment=other"))
    for change in ("seed=1", "model=lenet5", "mult=am32", "dataset=mnist", "train.epochs=3",
                   "train.optimizer.lr=0.2", "mult.exact_gradients=true"):
        assert cell_identity(compose(change)) != base, change
    assert cell_name(compose()).startswith("lenet300_am16_digits_s0_")


def test_table_identity_is_its_content(tmp_path):
    import ops

    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    ops.write_table("am16", str(a))
    ops.write_table("am16", str(b))
    c = tmp_path / "c.bin"
    ops.write_table("mit16", str(c))
    ida, idb, idc = (cell_identity(compose("mult=lut", f"mult.table={p}")) for p in (a, b, c))
    assert ida == idb != idc


def test_default_paths_are_the_repositorys_whatever_the_cwd(tmp_path, monkeypatch):
    from orchestrator.common import paths

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    c = validate(compose())
    assert paths.tracking_uri(c["tracking_uri"]) == f"sqlite:///{REPO / 'mlflow.db'}"
    assert paths.checkpoint_root(c["checkpoint_root"]) == REPO / "checkpoints"
    assert paths.data_dir(c["data_dir"]) == REPO / "data"
    assert paths.tracking_uri("sqlite:///rel.db") == f"sqlite:///{tmp_path / 'rel.db'}"  # made absolute
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://tracking:5000")
    assert paths.tracking_uri(None) == "http://tracking:5000"


def test_a_gpu_cell_needs_a_cuda_build_or_nvcc(tmp_path, monkeypatch):
    """cluster.gpus > 0 with no nvcc and no CUDA build in the cache is refused before anything is submitted; a CUDA
    build of these sources in the cache, or an nvcc on PATH, lets it through."""
    import json

    from ops.build import source_hash

    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvcc
    monkeypatch.setenv("AMDNN_OPS_CACHE", str(tmp_path / "cache"))
    gadi = ("cluster=gadi", "cluster.project=ab12")
    with pytest.raises(ConfigError, match=r"cluster.gpus=1 books GPUs, but the ops have no CUDA build") as info:
        validate(compose(*gadi))
    assert "python -m ops.build --cuda" in str(info.value)
    validate(compose(*gadi, "cluster.gpus=0"))  # CPU nodes need no CUDA build
    entry = tmp_path / "cache" / "x86-64-cuda-sm_70"
    entry.mkdir(parents=True)
    (entry / "build.json").write_text(json.dumps({"cuda_arch": "sm_70", "source_hash": "0" * 16}))
    with pytest.raises(ConfigError, match="no CUDA build"):  # a build of other sources does not count
        validate(compose(*gadi))
    (entry / "build.json").write_text(json.dumps({"cuda_arch": "sm_70", "source_hash": source_hash()}))
    validate(compose(*gadi))
    (entry / "build.json").unlink()
    (tmp_path / "bin").mkdir()
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    validate(compose(*gadi))
