"""MODELS, the one list of model names, and build_model.

Configs, docs and tests read model names from MODELS; nothing else keeps a list of them. The builders' modules are
imported on the first build, so reading the names (every launch validates its config) does not import TensorFlow.
"""

import importlib

from ops import NATIVE

from models.layer_names import am_layer_names
from models.resnet_depths import DEPTHS

# name -> (module, builder, leading arguments): builder(*arguments, maker, input_shape, num_classes) -> keras.Model
MODELS = {
    "lenet300": ("models.lenet", "lenet300", ()),
    "lenet5": ("models.lenet", "lenet5", ()),
    **{f"resnet{depth}": ("models.resnet", "resnet", (depth,)) for depth in DEPTHS},
}


def names():
    """The model names build_model accepts."""
    return list(MODELS)


def build_model(name, multiplier, input_shape, num_classes, exact_gradients=False, seed=0, layers=None,
                table_gradients=False):
    """Build model `name` for `multiplier` on inputs of `input_shape` (without the batch axis).

    `layers` ({layer name: (multiplier, exact_gradients)}, e.g. from models.layer_rules) gives the named
    Conv2D/Dense layers a multiplier of their own; every other one takes `multiplier` and `exact_gradients`.

    "native" gives Keras' own Conv2D/Dense; any other multiplier (ops.names() or "lut:<path>") gives AMConv2D /
    AMDense with the same weight names and layouts. The output is class probabilities (softmax), so the matching
    loss is sparse categorical cross-entropy with from_logits=False. Initial weights depend only on `seed`.
    Compile a model with AM layers with jit_compile=False (its ops cannot be compiled by XLA). table_gradients: the
    integer modes' layers take their gradients through the table (any scheme).
    """
    # Here, not at the top: these import Keras and TensorFlow, which reading MODELS (every launch) does not need.
    from models import layers as am_layers  # noqa: PLC0415
    from models.layer_maker import LayerMaker  # noqa: PLC0415

    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")
    own = {str(layer): (str(mult), bool(exact)) for layer, (mult, exact) in (layers or {}).items()}
    for mult in {multiplier, *(mult for mult, _ in own.values())} - {NATIVE}:
        am_layers.check_multiplier(mult)
    unknown = sorted(set(own) - set(am_layer_names(name)))
    if unknown:
        raise ValueError(f"{name} has no Conv2D/Dense layer {', '.join(unknown)}; its layers: "
                         f"{', '.join(am_layer_names(name))}")
    if not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    input_shape = tuple(int(d) for d in input_shape)
    if not input_shape or min(input_shape) < 1:
        raise ValueError(f"input_shape must be positive sizes without the batch axis, e.g. (28, 28, 1); "
                         f"got {input_shape}")
    maker = LayerMaker(multiplier=multiplier, exact_gradients=bool(exact_gradients), seed=int(seed), layers=own,
                       table_gradients=bool(table_gradients))
    module, builder, arguments = MODELS[name]
    return getattr(importlib.import_module(module), builder)(*arguments, maker, input_shape, num_classes)
