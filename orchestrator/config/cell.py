"""A cell's configuration resolved once, at launch: one typed, immutable CellConfig that the cell's code reads.

    cell = resolve(cfg)              # the one reader of a composed DictConfig or dict: validates it (ConfigError
                                     # naming every problem) and computes every derived value, once
    cell.train.epochs, cell.mult.spec, cell.paths.data_dir, cell.identity, cell.cell_dir   # what the code reads
    CellConfig.from_json(cell.to_json()) == cell    # the job's copy (run-config.json): read back, trusted

Derived at resolve time and never again: the multiplier spec (a table's absolute path), the data and checkpoint
folders, the tracking URI, the identity (a table hashed by its contents), the cell's name and folder. The training
process reads them from run-config.json without validating again: what was checked at launch (the cluster's
executor parameters among it) is not checked a second time where it can no longer be acted on.

`composed` keeps the validated config as composed (plain data, read-only): the MLflow params (flatten of it) and
run-config.json say what the user asked for, with the keys the user wrote, exactly as before.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

from models.engines import DEFAULT_ENGINE
from models.layer_names import am_layer_names
from models.layer_rules import Setting, from_spec

from orchestrator.common import paths
from orchestrator.config.identity import canonical_json, cell_name, defining_config, mult_label, run_tags
from orchestrator.config.validate import changed_layers, folded, mult_spec, validate
from orchestrator.tracking import launches

LAYER_MAP_PARAM = "mult.layer_map"  # the resolved per-layer map, as a run's param (CellConfig.layer_params)
FORMAT = 1  # of to_json; a file of another format is refused rather than misread


@dataclass(frozen=True)
class ModelConfig:
    name: str                      # a models.registry name


@dataclass(frozen=True)
class MultConfig:
    name: str                      # a mode of ops.modes.multipliers, or lut
    spec: str                      # as ops and models take it: the mode, or lut:<absolute table path>
    label: str                     # as the results table names it: the mode, or lut:<table file name>
    table: str | None = None       # lut only: the table file as configured
    exact_gradients: bool = False  # true: only the forward pass is approximate
    table_gradients: bool = False  # integer modes: the backward's products through the table too
    # The layers whose multiplier is not the above (mult.keep, mult.layers resolved): layer name -> {"spec",
    # "exact_gradients"}; empty without rules (and in the configs of jobs submitted before rules existed).
    layers: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=lambda: FrozenMapping({}))

    @property
    def simulated(self) -> bool:
        """Whether any product goes through the AM ops (everything but native, or a native cell with AM layers)."""
        return self.name != "native" or any(layer["spec"] != "native" for layer in self.layers.values())

    def layer_multipliers(self) -> dict[str, tuple[str, bool]]:
        """{layer: (spec, exact_gradients)} of the layers with their own multiplier, as models.build_model takes it."""
        return {name: (layer["spec"], bool(layer["exact_gradients"])) for name, layer in self.layers.items()}


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    augment: bool = False


@dataclass(frozen=True)
class OptimizerConfig:
    name: str
    lr: float
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    weight_decay_mode: str = "coupled"


@dataclass(frozen=True)
class ScheduleConfig:
    name: str
    step_epochs: int = 30
    gamma: float = 0.1


@dataclass(frozen=True)
class CollapseConfig:
    rollbacks: int
    lr_factor: float


@dataclass(frozen=True)
class TrainConfig:
    epochs: int
    batch_size: int
    optimizer: OptimizerConfig
    schedule: ScheduleConfig
    collapse: CollapseConfig
    calibration_batches: int = 0   # integer modes: batches that set the activation ranges before training

    def as_dict(self) -> dict:
        """Plain data, as models.optim takes a recipe."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CheckpointConfig:
    every_n_steps: int             # 0: epoch ends only
    keep_last: int


@dataclass(frozen=True)
class RetriesConfig:
    crashes: int
    nan_rollbacks: int


@dataclass(frozen=True)
class TrackingConfig:
    uri: str                       # resolved: the configured one, else $MLFLOW_TRACKING_URI, else the repo's SQLite
    mode: str                      # auto | direct | single_writer
    patience_s: float
    experiment: str
    # The launch whose parent run the cell's run is nested under (tracking.launches: a sweep's, from the
    # environment its callback set), None for a single run; a default, so that older run-config.json files load.
    launch: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PathsConfig:
    data_dir: str                  # resolved, absolute
    checkpoint_root: str           # resolved, absolute


@dataclass(frozen=True)
class CellConfig:
    identity: str                  # sha256 of the defining config (config.identity)
    name: str                      # the cell's folder name
    cell_dir: str                  # checkpoint_root/name
    defining: str                  # the canonical JSON of the defining config, as the identity hashed it
    seed: int
    engine: str                    # Keras' backend (models.engines)
    model: ModelConfig
    mult: MultConfig
    dataset: DatasetConfig
    train: TrainConfig
    checkpoint: CheckpointConfig
    retries: RetriesConfig
    tracking: TrackingConfig
    paths: PathsConfig
    profile_layers: bool
    system_metrics: bool
    cluster: Mapping[str, Any]     # open-ended (each scheduler its own keys), read-only
    composed: Mapping[str, Any]    # the validated config as composed, read-only (see the module docstring)
    share_with_group: bool = False  # who may read what the cell writes (orchestrator.common.permissions); a
                                    # default, so that the configs of jobs submitted before it existed still load

    @property
    def gpus(self) -> int | None:
        """cluster.gpus (0 on every scheduler preset unless asked), None where the cell runs locally."""
        gpus = self.cluster.get("gpus")
        return None if gpus is None else int(gpus)

    def defining_config(self) -> dict:
        return json.loads(self.defining)

    def layer_settings(self) -> dict[str, Setting]:
        """Every multiplying layer of the model, in order, with the Setting it multiplies with (models.layer_rules)."""
        default = from_spec(self.mult.spec, self.mult.exact_gradients)
        own = self.mult.layers
        return {name: from_spec(own[name]["spec"], own[name]["exact_gradients"]) if name in own else default
                for name in am_layer_names(self.model.name)}

    def layer_params(self) -> dict[str, str]:
        """The resolved per-layer map as an MLflow param, mult.layer_map ({"conv1": "native", ...}, every layer), for a
        cell whose layers do not all take mult.name's multiplier; else nothing (the params of cells without rules
        stay what they were)."""
        if not self.mult.layers:
            return {}
        text = {name: s.label + (" exact_gradients" if s.exact_gradients else "")
                for name, s in self.layer_settings().items()}
        return {LAYER_MAP_PARAM: json.dumps(text, separators=(",", ":"))}

    def tags(self) -> dict[str, str]:
        """The tags the cell's MLflow run starts with (config.identity.base_tags)."""
        return run_tags(self.identity, self.model.name, self.mult.label, self.dataset.name, self.seed, self.defining)

    def as_dict(self) -> dict:
        """The config as composed, plain data: what the MLflow params flatten."""
        return _thaw(self.composed)

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, **{f.name: _thaw(getattr(self, f.name))
                                                for f in dataclasses.fields(self)}}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "CellConfig":
        """The CellConfig to_json wrote, trusted as resolved (nothing is validated or computed again)."""
        data = json.loads(text)
        if data.pop("format", None) != FORMAT:
            raise ValueError(f"not a CellConfig of format {FORMAT} (written by another version of AMDNN?)")
        return _build(cls, data)


def resolve(cfg: Any) -> CellConfig:
    """Validate a composed config (DictConfig or mapping) once and resolve everything a cell needs from it; raises
    ConfigError naming every problem."""
    c = validate(cfg)
    c.pop("hydra", None)
    asked = c                # as composed: what the params show
    c = folded(c)            # rules giving every layer one multiplier are that multiplier (validate.folded)
    defining = canonical_json(defining_config(c))
    identity = hashlib.sha256(defining.encode()).hexdigest()  # as config.identity.cell_identity hashes it
    name = cell_name(c, identity)
    root = paths.checkpoint_root(c.get("checkpoint_root"))
    train, mult = c["train"], c["mult"]
    return CellConfig(
        identity=identity, name=name, cell_dir=str(root / name), defining=defining,
        seed=int(c["seed"]), engine=str(c.get("engine", DEFAULT_ENGINE)),
        model=ModelConfig(name=str(c["model"]["name"])),
        mult=MultConfig(name=str(mult["name"]), spec=mult_spec(c), label=mult_label(c), table=mult.get("table"),
                        exact_gradients=bool(mult.get("exact_gradients", False)),
                        table_gradients=bool(mult.get("table_gradients", False)),
                        layers=_freeze({name: {"spec": s.spec, "exact_gradients": s.exact_gradients}
                                        for name, s in changed_layers(c).items()})),
        dataset=DatasetConfig(name=str(c["dataset"]["name"]), augment=bool(c["dataset"].get("augment", False))),
        train=TrainConfig(epochs=int(train["epochs"]), batch_size=int(train["batch_size"]),
                          optimizer=_known(OptimizerConfig, train["optimizer"]),
                          schedule=_known(ScheduleConfig, train["schedule"]),
                          collapse=_known(CollapseConfig, train["collapse"]),
                          calibration_batches=int(train.get("calibration_batches", 0))),
        checkpoint=_known(CheckpointConfig, c["checkpoint"]), retries=_known(RetriesConfig, c["retries"]),
        tracking=TrackingConfig(uri=paths.tracking_uri(c.get("tracking_uri")), mode=str(c["tracking_mode"]),
                                patience_s=float(c["tracking_patience_s"]), experiment=str(c["experiment"]),
                                launch=_freeze(launches.from_environment())),
        paths=PathsConfig(data_dir=str(paths.data_dir(c.get("data_dir"))), checkpoint_root=str(root)),
        profile_layers=bool(c.get("profile_layers", False)), system_metrics=bool(c.get("system_metrics", False)),
        share_with_group=bool(c.get("share_with_group", False)), cluster=_freeze(c.get("cluster") or {}),
        composed=_freeze(asked))


_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


def _known(cls, values: Mapping[str, Any]):
    """cls from the keys of `values` it has (validate has refused any other key), each of its field's type; absent
    ones take their default."""
    return cls(**{f.name: _TYPES.get(f.type, lambda v: v)(values[f.name])
                  for f in dataclasses.fields(cls) if f.name in values})


def _build(cls, data: Mapping[str, Any]):
    """A (nested) config dataclass from to_json's plain data."""
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    out = {}
    for key, value in data.items():
        kind = _NESTED.get(hints[key])
        out[key] = _build(kind, value) if kind else _freeze(value) if isinstance(value, Mapping) else value
    return cls(**out)


_NESTED = {cls.__name__: cls for cls in (ModelConfig, MultConfig, DatasetConfig, OptimizerConfig, ScheduleConfig,
                                         CollapseConfig, TrainConfig, CheckpointConfig, RetriesConfig, TrackingConfig,
                                         PathsConfig)}


class FrozenMapping(Mapping):
    """A read-only mapping that pickles (a job's CellConfig travels in submitit's pickle)."""

    def __init__(self, items: Mapping[str, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"FrozenMapping({self._items!r})"


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FrozenMapping({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _thaw(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value
