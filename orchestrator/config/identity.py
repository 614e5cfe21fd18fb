"""The stable identity of a grid cell: a hash of the config keys that define the run, and nothing else; and the
names a cell goes by (its folder, its multiplier label, the tags of its MLflow run).

Defining keys: model, mult (a table by its contents, not its path), dataset, seed, train, and the engine where it is
not the default (so cells trained before engines existed keep their identities). Per-layer rules (mult.keep,
mult.layers) count by what they resolve to: the layers whose multiplier differs from mult.name's, under mult.layers,
and nothing where none does, so a cell without rules keeps the identity it had before rules existed, and two ways of
writing the same per-layer map are one cell. Paths, the cluster, the
tracking URI, checkpoint cadence and retry bounds are left out: the same cell launched from a laptop or a cluster,
by anyone, is the same run, finds the same checkpoints and continues the same MLflow run.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path
from typing import Any, Mapping

from models.engines import DEFAULT_ENGINE
from models.layer_rules import describe
from ops.modes.multipliers import TABLE_NAMES
from ops.modes.multipliers import label as mult_label_of

from orchestrator.common import paths
from orchestrator.common.cellfiles import job_id
from orchestrator.config.validate import changed_layers, default_setting, folded, has_layer_rules, layer_settings, \
    to_dict
from orchestrator.tracking.tracker import TAG_CELL, TAG_DEFINING

DEFINING_KEYS = ("model", "mult", "dataset", "seed", "train")
SEED_KEY = "seed"   # the one defining key whose cells the results table treats as repeats of one experiment


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(Path(path).expanduser(), "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _mult_defining(name: str, table: str | None, exact_gradients: Any) -> dict:
    """A multiplier as the identity holds it: its name, its gradient mode, a table by its contents."""
    out = {"name": name, "exact_gradients": exact_gradients}
    if name in TABLE_NAMES and table not in (None, ""):
        out["table_sha256"] = _file_sha256(str(table))
    return out


def defining_config(cfg: Any) -> dict:
    """The part of the config the identity hashes (plain data, table path replaced by its content hash, per-layer
    rules by the layers they change; rules giving every layer one multiplier count as that multiplier)."""
    c = folded(cfg)
    out = {key: c[key] for key in DEFINING_KEYS}
    mult = dict(out["mult"])
    table = mult.pop("table", None)
    mult.pop("keep", None), mult.pop("layers", None)
    if not mult.get("table_gradients"):  # false, or a config from before the key: the cells of before
        mult.pop("table_gradients", None)
    if mult.get("name") in TABLE_NAMES and table not in (None, ""):
        mult["table_sha256"] = _file_sha256(table)
    layers = changed_layers(c)
    if layers:
        mult["layers"] = {name: _mult_defining(s.name, s.table, s.exact_gradients) for name, s in layers.items()}
    out["mult"] = mult
    if not out["train"].get("calibration_batches"):  # 0, or a config from before the key: the cells of before
        out["train"] = {key: value for key, value in out["train"].items() if key != "calibration_batches"}
    engine = c.get("engine", DEFAULT_ENGINE)
    if engine != DEFAULT_ENGINE:  # another backend's kernels, reductions and seeds: other bits, another cell
        out["engine"] = engine
    return out


def canonical_json(defining: Mapping[str, Any]) -> str:
    """The one text of a defining config: what the identity hashes and the MLflow run carries."""
    return json.dumps(defining, sort_keys=True, separators=(",", ":"))


def cell_identity(cfg: Any) -> str:
    """sha256 hex of the canonical JSON of the defining config."""
    return hashlib.sha256(canonical_json(defining_config(cfg)).encode()).hexdigest()


def without_seed(defining: Mapping[str, Any]) -> dict:
    """A defining config minus the seed: what the seeds of one experiment share (one cell of the results table)."""
    return {key: value for key, value in defining.items() if key != SEED_KEY}


def cell_name(cfg: Mapping[str, Any], identity: str | None = None) -> str:
    """A readable, unique folder name: model_mult_dataset_sSEED_<first 12 hex of the identity>."""
    c = folded(cfg)
    identity = identity or cell_identity(c)
    return f"{c['model']['name']}_{c['mult']['name']}_{c['dataset']['name']}_s{c['seed']}_{identity[:12]}"


def cell_folder(cfg: Mapping[str, Any], identity: str | None = None) -> Path:
    """The cell's folder: checkpoint_root/cell_name. The one place that says where a cell's files live."""
    c = to_dict(cfg)
    return paths.checkpoint_root(c.get("checkpoint_root")) / cell_name(c, identity)


def mult_label(cfg: Mapping[str, Any]) -> str:
    """The multiplier as the results table names it: the mode, or lut:<table file name>, and the layers that differ
    from it, grouped: "am16 [first,last: native]", "am16 [stage4: mit16; last: native]"."""
    cfg = folded(cfg)
    mult = cfg["mult"]
    label = mult_label_of(str(mult["name"]), mult.get("table"))
    if not has_layer_rules(cfg):
        return label
    layers = describe(str(cfg["model"]["name"]), layer_settings(cfg), default_setting(cfg))
    return f"{label} [{layers}]" if layers else label


def base_tags(identity: str, cfg: Mapping[str, Any]) -> dict[str, str]:
    """The tags a cell's MLflow run starts with: what status, the report and the resume cron find it by."""
    return run_tags(identity, cfg["model"]["name"], mult_label(cfg), cfg["dataset"]["name"], cfg["seed"],
                    canonical_json(defining_config(cfg)))


def run_tags(identity: str, model: str, mult: str, dataset: str, seed: int, defining: str) -> dict[str, str]:
    """base_tags from the cell's names and its canonical defining JSON (a resolved CellConfig has them all)."""
    tags = {TAG_CELL: identity, "amdnn.model": model, "amdnn.mult": mult, "amdnn.dataset": dataset,
            "amdnn.seed": str(seed), "amdnn.host": socket.gethostname(), TAG_DEFINING: defining}
    if job_id():
        tags["amdnn.job_id"] = job_id()  # type: ignore[assignment]
    return tags
