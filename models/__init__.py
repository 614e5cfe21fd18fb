"""AMDNN models: Keras networks built for a multiplier, the AM layers they use, and the datasets they train on.

    models.MODELS / models.names()                      the model names (one list)
    models.build_model(name, multiplier, input_shape, num_classes, exact_gradients=False, seed=0, layers=None,
                       table_gradients=False)       -> keras.Model (layers: {name: (multiplier, exact_gradients)})
    models.layer_rules.resolve(model, default, rules, keep)   per-layer multipliers from rules (no Keras)
    models.convert_model(model, multiplier, exact_gradients=False) -> keras.Model (same weights)
    models.AMConv2D, models.AMDense                     Conv2D / Dense over ops.conv2d / ops.matmul
    models.IntConv2D, models.IntDense                   Conv2D / Dense on 8-bit codes through an integer mode
    models.datasets                                     DATASETS, load, download, batches, steps_per_epoch
    python -m models.download --dataset mnist --data-dir DIR
    python -m models.profile --model lenet5 --mult am16     every AM layer timed against the native one
    python -m models.layer_list lenet5 --keep first_last    the layers, shapes, MACs, multipliers and relative energy

Names are resolved on first use, so `models.datasets` and the download command do not import TensorFlow.
"""

import importlib

_EXPORTS = {
    "MODELS": "models.registry",
    "names": "models.registry",
    "build_model": "models.registry",
    "convert_model": "models.convert",
    "AMConv2D": "models.layers",
    "AMDense": "models.layers",
    "IntConv2D": "models.integer_layers",
    "IntDense": "models.integer_layers",
}

__all__ = [*_EXPORTS, "datasets"]


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name == "datasets":
        return importlib.import_module("models.datasets")
    raise AttributeError(f"module 'models' has no attribute {name!r}")
