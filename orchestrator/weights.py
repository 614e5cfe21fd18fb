"""A cell's final weights, from its MLflow run, back in its model.

    python -m orchestrator.weights RUN_ID [--tracking-uri URI]    # load them, print the model's summary
    model = load_model(RUN_ID, tracking_uri)                      # the same, as a Keras model

The run's artifacts hold what it takes (orchestrator.cell.artifacts): record/config.yaml, the resolved config the cell
ran with, and weights/final_weights.npz, its variables by Keras path. The model is built from the config with
models.build_model (network, multiplier, data set's input shape and classes, seed) on the run's engine (Keras'
backend), and every variable is assigned its trained value; a variable the file lacks, or one it holds that the model
has not, is an error: the code changed the network since the run.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from orchestrator.cell import record
from orchestrator.common import paths
from orchestrator.common.cellfiles import FINAL_WEIGHTS
from orchestrator.config.cell import CellConfig, resolve

# Where orchestrator.cell.artifacts logs them: its record/ and weights/ parts, under the names the cell writes.
CONFIG_ARTIFACT = f"record/{record.CONFIG}"
WEIGHTS_ARTIFACT = f"weights/{FINAL_WEIGHTS}"


def client(tracking_uri: str | None) -> Any:
    """An MlflowClient of the store (launch.py's default where None), without download progress bars."""
    from mlflow.tracking import MlflowClient  # only here: reading the package's modules loads no MLflow

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    return MlflowClient(paths.tracking_uri(tracking_uri))


def run_config(run_id: str, tracking_uri: str | None) -> dict:
    """The resolved config run `run_id` trained with (its record/config.yaml), as plain data."""
    with tempfile.TemporaryDirectory(prefix="amdnn-config-") as folder:
        path = client(tracking_uri).download_artifacts(run_id, CONFIG_ARTIFACT, folder)
        return yaml.safe_load(Path(path).read_text())


def build(cell: CellConfig, weights: Mapping[str, np.ndarray]):
    """The cell's model (models.build_model, on the cell's engine) holding `weights` (by Keras variable path)."""
    from models import build_model
    from models.datasets.registry import get_spec
    from models.engines import select

    select(cell.engine)  # before Keras loads; refused if Keras already runs another backend
    spec = get_spec(cell.dataset.name)
    model = build_model(cell.model.name, cell.mult.spec, spec.input_shape, spec.num_classes,
                        exact_gradients=cell.mult.exact_gradients, seed=cell.seed,
                        layers=cell.mult.layer_multipliers(), table_gradients=cell.mult.table_gradients)
    missing = [v.path for v in model.variables if v.path not in weights]
    extra = sorted(set(weights) - {v.path for v in model.variables})
    if missing or extra:
        raise ValueError(f"the weights do not fit the model {cell.model.name} as the code builds it now: missing "
                         f"{missing or 'none'}, not in the model {extra or 'none'}")
    for variable in model.variables:
        variable.assign(weights[variable.path])
    return model


def read_weights(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {key: npz[key] for key in npz.files}


def load_model(run_id: str, tracking_uri: str | None = None) -> Any:
    """The Keras model of run `run_id`, with its final weights."""
    composed = run_config(run_id, tracking_uri)
    with tempfile.TemporaryDirectory(prefix="amdnn-weights-") as folder:
        weights = read_weights(Path(client(tracking_uri).download_artifacts(run_id, WEIGHTS_ARTIFACT, folder)))
    return build(resolve(composed), weights)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m orchestrator.weights", description=__doc__.split("\n")[0])
    parser.add_argument("run_id", help="the cell's MLflow run id")
    parser.add_argument("--tracking-uri", default=None, help="the MLflow store (default: as launch.py's)")
    args = parser.parse_args(argv)
    model = load_model(args.run_id, args.tracking_uri)
    model.summary(print_fn=lambda line, **_: print(line))
    count = sum(int(np.prod(v.shape)) for v in model.variables)
    print(f"run {args.run_id}: {len(model.variables)} variables ({count} numbers) loaded from {WEIGHTS_ARTIFACT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
