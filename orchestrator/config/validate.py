"""Checking a composed cell config before anything is trained or submitted, and reading its parts.

`validate(cfg)` is called once per cell, at launch, by `config.cell.resolve`: in the sweep callback for every cell of
a sweep before the first one runs, in launch_cell, and in the cluster launchers before they submit; never in the job. The valid choices come from the registries
(models, ops, models.datasets, models.optim): the conf/ group files mirror them and a test keeps them equal.
The valid keys are those conf/ defines (config.keys); a cluster's resources are checked by the code that turns them
into a job script (schedulers.params), so a config the launcher would refuse is refused here, with or without -m.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

import models
import ops
from models import datasets, optim
from models import layer_rules
from models.engines import ENGINES
from ops.build import cache_root, source_hash
from ops.build.cuda import HOW_TO_BUILD, cached_builds, find_nvcc
from ops.modes.multipliers import LUT_NAME, TABLE_NAMES, compose, integer_names

from orchestrator.common import paths
from orchestrator.config.keys import unknown_key_message, unknown_keys
from orchestrator.schedulers.params import executor_parameters
from orchestrator.schedulers.resources import check_scheduler
from orchestrator.tracking import mode as tracking_mode


class ConfigError(ValueError):
    """An invalid cell config; the message names every bad key and what would be valid. Raised before anything is
    trained or submitted; the only error a cell's training process reports as refused rather than crashed."""


def config_error(problems: list[str]) -> ConfigError:
    """One ConfigError listing every problem, one per line."""
    return ConfigError("invalid AMDNN config:\n  - " + "\n  - ".join(problems))


def model_names() -> list[str]:
    names = getattr(models, "MODEL_NAMES", None)
    return list(names() if callable(names) else names) if names is not None else list(models.names())


def mult_names() -> list[str]:
    return list(ops.names(include_native=True))


def dataset_names() -> list[str]:
    return list(datasets.DATASETS)


def augmentable_datasets() -> list[str]:
    """The datasets with a usual augmentation (dataset.augment=true)."""
    return [name for name, spec in datasets.DATASETS.items() if spec.augmentation is not None]


def to_dict(cfg: Any) -> dict:
    """A plain, resolved dict of a DictConfig (or a copy of a mapping)."""
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)  # type: ignore[return-value]
    return copy.deepcopy(dict(cfg))


def mult_spec(cfg: Mapping[str, Any]) -> str:
    """The multiplier as ops and models take it: a mode name, or "name:<absolute path>" for a table."""
    mult = cfg["mult"]
    return compose(str(mult["name"]), mult.get("table"))


def default_setting(cfg: Mapping[str, Any]) -> layer_rules.Setting:
    """The multiplier of the cell's layers that no per-layer rule names (mult.name, mult.table, exact_gradients)."""
    mult = cfg["mult"]
    return layer_rules.setting(str(mult["name"]), mult.get("table"), bool(mult.get("exact_gradients", False)))


def has_layer_rules(cfg: Mapping[str, Any]) -> bool:
    """Whether the cell names per-layer multipliers (mult.keep or mult.layers); without, every layer takes mult.name."""
    mult = cfg["mult"]
    return mult.get("keep") is not None or bool(mult.get("layers"))


def layer_settings(cfg: Mapping[str, Any]) -> dict[str, layer_rules.Setting]:
    """Every multiplying layer of the cell's model, in order, with its Setting (models.layer_rules.resolve over
    mult.keep and mult.layers); raises layer_rules.RuleError listing every problem."""
    mult = cfg["mult"]
    return layer_rules.resolve(str(cfg["model"]["name"]), default_setting(cfg), mult.get("layers") or [],
                               mult.get("keep"))


def folded(cfg: Mapping[str, Any]) -> dict:
    """The config with rules that give every layer one multiplier written as that multiplier without rules: a
    sensitivity study's all-approximate baseline (`mult=native mult.layers=[{match: all, mult: am16}]`) is the cell
    `mult=am16`, with its identity, folder, label and checkpoints. Any other config is returned as it is (a copy)."""
    c = to_dict(cfg)
    if not has_layer_rules(c):
        return c
    settings = set(layer_settings(c).values())
    if len(settings) != 1:
        return c
    (only,) = settings
    c["mult"] = {**c["mult"], "name": only.name, "table": only.table, "exact_gradients": only.exact_gradients,
                 "keep": None, "layers": []}
    return c


def changed_layers(cfg: Mapping[str, Any]) -> dict[str, layer_rules.Setting]:
    """The layers whose Setting is not mult.name's (empty without rules): what sets the cell apart."""
    if not has_layer_rules(cfg):
        return {}
    return layer_rules.changed(layer_settings(cfg), default_setting(cfg))


def _check_table_gradients(c: Mapping[str, Any], errors: list[str]) -> None:
    """mult.table_gradients: true or false; true only where the cell's layers run integer modes, and the backward is
    not asked to be exact."""
    mult = c.get("mult") if isinstance(c.get("mult"), Mapping) else {}
    value = mult.get("table_gradients", False)  # absent in configs from before the key
    if not isinstance(value, bool):
        errors.append(f"mult.table_gradients={value!r} must be true or false")
        return
    if not value:
        return
    if mult.get("exact_gradients"):
        errors.append("mult.table_gradients=true and mult.exact_gradients=true contradict each other: the backward "
                      "through the table, or with exact products; pick one")
    try:
        specs = {s.spec for s in layer_settings(c).values()} if has_layer_rules(c) else {mult_spec(c)}
        integer = {spec for spec in specs if ops.parse(spec).is_integer}
    except (ValueError, OSError, KeyError, TypeError):
        return  # the multiplier's own check reports it
    if not integer:
        errors.append(f"mult.table_gradients=true applies to the integer modes ({', '.join(integer_names())}); "
                      f"this cell has none")


def validate(cfg: Any) -> dict:
    """Check a cell config; return it as a plain dict, or raise ConfigError listing every problem."""
    c = to_dict(cfg)
    errors: list[str] = [unknown_key_message(path) for path in unknown_keys(c)]

    def need(path: str) -> Any:
        node: Any = c
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node or node[part] in (None, "???"):
                errors.append(f"{path} is missing")
                return None
            node = node[part]
        return node

    def choice(path: str, valid: list[str], hint: str) -> None:
        value = need(path)
        if value is not None and value not in valid:
            errors.append(f"{path}={value!r} is not one of {', '.join(valid)} ({hint})")

    choice("model.name", model_names(), "pick with model=NAME")
    choice("engine", list(ENGINES), "Keras' backend: engine=tensorflow or engine=torch")
    choice("dataset.name", dataset_names(), "pick with dataset=NAME")
    _check_augment(c.get("dataset") or {}, errors)
    mult = need("mult.name")
    if mult is not None:
        if mult in TABLE_NAMES:  # lut needs a table; an integer mode without one is the exact multiplier
            table = c["mult"].get("table")
            path = os.path.expanduser(str(table))
            if mult == LUT_NAME and table in (None, "???", ""):
                errors.append("mult=lut needs a table file: mult=lut mult.table=/path/to/table.bin")
            elif table not in (None, "") and not (os.path.isfile(path) and os.access(path, os.R_OK)):
                what = "an ApproxTrain-format multiplier table" if mult == LUT_NAME else \
                    "an integer table, .int8s.npy for int8 modes, .int8u.npy for uint8 ones; `python -m ops.tables " \
                    "from-c` writes them"
                errors.append(f"mult.table={table!r} is not a readable file ({what})")
            else:
                try:
                    ops.parse(mult_spec(c))
                except (ValueError, OSError) as e:
                    errors.append(f"mult={mult} mult.table={table!r}: {e}")
        elif mult not in mult_names():
            errors.append(f"mult={mult!r} is not one of {', '.join(mult_names())}, lut with mult.table=FILE, or an "
                          f"integer mode ({', '.join(integer_names())}, with mult.table=FILE for a circuit)")
    model = c.get("model", {}).get("name") if isinstance(c.get("model"), Mapping) else None
    if mult in [*mult_names(), *TABLE_NAMES] and has_layer_rules(c) and model in model_names():
        try:
            layer_settings(c)
        except layer_rules.RuleError as e:
            errors.extend(e.problems)
    _check_table_gradients(c, errors)
    choice("train.optimizer.name", sorted(optim.OPTIMIZERS), "train.optimizer.name=NAME")
    choice("train.schedule.name", sorted(optim.SCHEDULES), "train.schedule.name=NAME")
    for path, low, kind in [("train.epochs", 1, int), ("train.batch_size", 1, int), ("seed", 0, int),
                            ("checkpoint.every_n_steps", 0, int), ("checkpoint.keep_last", 1, int),
                            ("retries.crashes", 0, int), ("retries.nan_rollbacks", 0, int)]:
        value = need(path)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            errors.append(f"{path}={value!r} must be an integer >= {low}")
    calibration = (c.get("train") or {}).get("calibration_batches", 0)  # absent in configs from before the key
    if isinstance(calibration, bool) or not isinstance(calibration, int) or calibration < 0:
        errors.append(f"train.calibration_batches={calibration!r} must be an integer >= 0")
    if not isinstance(c.get("profile_layers", False), bool):
        errors.append(f"profile_layers={c['profile_layers']!r} must be true or false")
    lr = need("train.optimizer.lr")
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float)) or lr <= 0):
        errors.append(f"train.optimizer.lr={lr!r} must be a number > 0")
    for key in ("system_metrics", "share_with_group"):
        if not isinstance(c.get(key, False), bool):
            errors.append(f"{key}={c[key]!r} must be true or false")
    mode_problem = tracking_mode.problem(c.get("tracking_mode"), paths.tracking_uri(c.get("tracking_uri")))
    if mode_problem:
        errors.append(mode_problem)
    _check_cluster(c.get("cluster") or {}, errors)
    if errors:
        raise config_error(errors)
    return c


def _check_augment(dataset: Mapping[str, Any], errors: list[str]) -> None:
    augment = dataset.get("augment", False)
    if not isinstance(augment, bool):
        errors.append(f"dataset.augment={augment!r} must be true or false")
    elif augment and dataset.get("name") in dataset_names() and dataset["name"] not in augmentable_datasets():
        errors.append(f"dataset.augment=true but {dataset['name']} has no usual augmentation; datasets with one: "
                      f"{', '.join(augmentable_datasets())} (or dataset.augment=false)")


def _check_cluster(cluster: Mapping[str, Any], errors: list[str]) -> None:
    """A scheduler's cluster config: everything the launcher checks when it writes the job script."""
    if cluster.get("scheduler") is None:
        return  # cluster=local: no job script
    for key, low in (("max_requeues", 0), ("max_attempts", 1), ("array_parallelism", 1)):
        value = cluster.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
            errors.append(f"cluster.{key}={value!r} must be an integer >= {low}")
    try:
        executor_parameters(check_scheduler(str(cluster["scheduler"])), cluster)
    except ValueError as e:
        errors.append(str(e))
    _check_gpu_build(cluster, errors)


def _check_gpu_build(cluster: Mapping[str, Any], errors: list[str]) -> None:
    """A cell that books GPUs must be able to run the ops there: an nvcc that builds the CUDA library on first use, or
    a CUDA build of these sources already in the ops' cache (made e.g. on a login node). Without either, the cell
    would stop at its first step on the GPU node, after waiting in the queue; refused here instead."""
    gpus = cluster.get("gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:
        return
    if find_nvcc() is not None or next(cached_builds(cache_root(), source_hash()), None) is not None:
        return
    errors.append(f"cluster.gpus={gpus} books GPUs, but the ops have no CUDA build in {cache_root()} and no nvcc is "
                  f"found (CUDA_HOME or PATH) to build one: {HOW_TO_BUILD}; or set cluster.gpus=0 to train on the "
                  "nodes' CPUs")
