"""Run under one Keras backend (KERAS_BACKEND): a LeNet-5 whose layers each have their own multiplier computes, layer
by layer, exactly what a LeNet-5 built wholly under that layer's multiplier computes on the same input.

    KERAS_BACKEND=torch python -m tests.models.mixed_probe      (from the repository's root; prints "same bits")

Initial weights depend only on the seed and the layer name (models.layer_maker), so the mixed model and every
reference hold the same weights; each layer's input is taken from the mixed model and fed to the reference's layer.
"""

import numpy as np
import keras

from models import build_model
from models.layers import AMConv2D, AMDense
from models.profile import _passes  # forward+backward of one layer on either backend

OWN = {"conv1": ("native", False), "conv2": ("mit16", False), "fc1": ("am16", True), "predictions": ("am32", False)}
DEFAULT = ("acc16", False)  # fc2
SEED = 3


def main() -> None:
    mixed = build_model("lenet5", DEFAULT[0], (8, 8, 1), 10, seed=SEED, layers=OWN)
    names = ["conv1", "conv2", "fc1", "fc2", "predictions"]
    layers = [mixed.get_layer(name) for name in names]
    for layer in layers:
        mult, exact = OWN.get(layer.name, DEFAULT)
        if mult == "native":
            assert type(layer) in (keras.layers.Conv2D, keras.layers.Dense), f"{layer.name} is {type(layer)}"
        else:
            assert isinstance(layer, (AMConv2D, AMDense)) and (layer.multiplier, layer.exact_gradients) == (mult, exact), \
                f"{layer.name}: {layer.multiplier}, {layer.exact_gradients}, wanted {mult}, {exact}"
    probe = keras.Model(mixed.inputs, [t for layer in layers for t in (layer.input, layer.output)])
    x = np.random.default_rng(0).random((4, 8, 8, 1), dtype=np.float32)
    values = [keras.ops.convert_to_numpy(v) for v in probe(x)]
    for i, layer in enumerate(layers):
        mult, exact = OWN.get(layer.name, DEFAULT)
        reference = build_model("lenet5", mult, (8, 8, 1), 10, seed=SEED, exact_gradients=exact).get_layer(layer.name)
        expected = keras.ops.convert_to_numpy(reference(keras.ops.convert_to_tensor(values[2 * i])))
        assert np.array_equal(expected, values[2 * i + 1]), f"{layer.name} under {mult} differs from its reference"
        assert np.abs(values[2 * i + 1]).max() > 0, f"{layer.name} computed nothing"
        # the gradient mode too: both gradients (summed) of the mixed model's layer are its reference's
        x = keras.ops.convert_to_tensor(values[2 * i])
        dy = keras.ops.convert_to_tensor(np.random.default_rng(i).standard_normal(expected.shape).astype(np.float32))
        grads = float(_passes(layer, dy)[1](x))
        assert grads == float(_passes(reference, dy)[1](x)), f"{layer.name}'s gradients differ from its reference's"
        if exact:  # and the mode matters: the same multiplier with approximate gradients gives others
            other = build_model("lenet5", mult, (8, 8, 1), 10, seed=SEED).get_layer(layer.name)
            assert grads != float(_passes(other, dy)[1](x)), f"{layer.name}: exact gradients changed nothing"
    print(f"same bits on {keras.backend.backend()}")


if __name__ == "__main__":
    main()
