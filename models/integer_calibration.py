"""Calibration of the integer layers' activation ranges before training (docs/multipliers-spec.md, "Ranges").

    calibrate(model, batches) -> int      forward passes, no weight update: each integer layer's range becomes the
                                          smallest lo and largest hi of its inputs over the batches

A cell does this with `train.calibration_batches=N` (the first N batches of its first epoch, at a fresh start only:
the calibrated ranges are in every checkpoint after). Without calibration the first training step's batch sets the
range. Training then moves the range by the running update either way.
"""

from models.integer_layers import IntConv2D, IntDense


def integer_layers(model) -> list:
    """The model's integer layers, in model order (nested models included)."""
    return [layer for layer in model._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, (IntConv2D, IntDense))]


def calibrate(model, batches) -> int:
    """Widen every integer layer's range to hold each batch's inputs (inference passes: batch norm uses its moving
    statistics, nothing trains); returns the number of batches used (0 where the model has no integer layer)."""
    layers = integer_layers(model)
    if not layers:
        return 0
    used = 0
    for layer in layers:
        layer.calibrating = True
    try:
        for x in batches:
            model(x, training=False)
            used += 1
    finally:
        for layer in layers:
            layer.calibrating = False
    return used
