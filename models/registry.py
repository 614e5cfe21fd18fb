"""MODELS, the one list of model names, and build_model.

Configs, docs and tests read model names from MODELS; nothing else keeps a list of them.
"""

import functools

from models import layers, lenet, resnet
from models.layer_maker import LayerMaker

# name -> builder(maker, input_shape, num_classes) -> keras.Model
MODELS = {
    "lenet300": lenet.lenet300,
    "lenet5": lenet.lenet5,
    **{f"resnet{depth}": functools.partial(resnet.resnet, depth) for depth in resnet.DEPTHS},
}


def names():
    """The model names build_model accepts."""
    return list(MODELS)


def build_model(name, multiplier, input_shape, num_classes, exact_gradients=False, seed=0):
    """Build model `name` for `multiplier` on inputs of `input_shape` (without the batch axis).

    "native" gives Keras' own Conv2D/Dense; any other multiplier (ops.names() or "lut:<path>") gives AMConv2D /
    AMDense with the same weight names and layouts. The output is class probabilities (softmax), so the matching
    loss is sparse categorical cross-entropy with from_logits=False. Initial weights depend only on `seed`.
    Compile a model with AM layers with jit_compile=False (its ops cannot be compiled by XLA).
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(MODELS)}")
    if multiplier != layers.NATIVE:
        layers.check_multiplier(multiplier)
    if not isinstance(num_classes, int) or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes!r}")
    input_shape = tuple(int(d) for d in input_shape)
    if not input_shape or min(input_shape) < 1:
        raise ValueError(f"input_shape must be positive sizes without the batch axis, e.g. (28, 28, 1); "
                         f"got {input_shape}")
    maker = LayerMaker(multiplier=multiplier, exact_gradients=bool(exact_gradients), seed=int(seed))
    return MODELS[name](maker, input_shape, num_classes)
