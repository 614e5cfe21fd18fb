"""convert_model: the same network with its Conv2D/Dense layers under another multiplier, weights kept.

Works on functional and sequential models, nested ones included (keras.models.clone_model). Conv2D and Dense
(Keras' own or AM) become AMConv2D / AMDense for an AM multiplier, or Keras' own layers for "native"; every other
layer is cloned from its config. The result is not compiled.
"""

import keras

from ops import NATIVE

from models import layers

_WEIGHT_LAYERS = (keras.layers.Conv2D, keras.layers.Dense)  # AMConv2D / AMDense are subclasses


def _layer_for(layer, multiplier, exact_gradients):
    config = layer.get_config()
    config.pop("multiplier", None)
    config.pop("exact_gradients", None)
    if isinstance(layer, keras.layers.Conv2D):
        native, am = keras.layers.Conv2D, layers.AMConv2D
    else:
        native, am = keras.layers.Dense, layers.AMDense
        if getattr(layer, "lora_enabled", False) or getattr(layer, "quantization_mode", None):
            raise ValueError(f"layer {layer.name!r} uses LoRA or quantization; convert_model handles plain Dense only")
    if multiplier == NATIVE:
        return native.from_config(config)
    try:
        return am.from_config({**config, "multiplier": multiplier, "exact_gradients": exact_gradients})
    except ValueError as error:
        raise ValueError(f"cannot convert layer {layer.name!r}: {error}") from error


def convert_model(model, multiplier, exact_gradients=False):
    """A copy of `model` whose Conv2D/Dense layers multiply with `multiplier`, holding the same weight values."""
    if multiplier != NATIVE:
        layers.check_multiplier(multiplier)

    def clone(layer):
        if type(layer) in (keras.layers.Conv2D, keras.layers.Dense, layers.AMConv2D, layers.AMDense):
            return _layer_for(layer, multiplier, exact_gradients)
        if isinstance(layer, _WEIGHT_LAYERS):
            raise ValueError(f"layer {layer.name!r} is a {type(layer).__name__}, a subclass convert_model does not "
                             "know how to convert; use plain Conv2D/Dense layers")
        return layer.__class__.from_config(layer.get_config())

    try:
        converted = keras.models.clone_model(model, clone_function=clone, recursive=True)
    except ValueError as error:
        if isinstance(model, (keras.Sequential, keras.Model)) and "Functional" in str(error):
            raise ValueError(f"convert_model handles functional and sequential Keras models, not a subclassed "
                             f"{type(model).__name__}; build its layers with models.layers.conv2d / dense "
                             "instead") from error
        raise
    converted.set_weights(model.get_weights())
    return converted
