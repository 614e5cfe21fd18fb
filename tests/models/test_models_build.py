"""Every model builds natively with the right output shape, parameter count, layer names and seeded weights."""

import keras
import numpy as np
import pytest

import models
from models.datasets import load
from models.layer_names import am_layer_names

# trainable parameters, 10 classes; the ResNet counts are those of the usual CIFAR ResNets
TRAINABLE = {
    ("lenet300", (784,)): 266_610,
    ("lenet300", (28, 28, 1)): 266_610,
    ("lenet5", (28, 28, 1)): 61_706,
    ("lenet5", (8, 8, 1)): 61_706,
    ("resnet18", (32, 32, 3)): 11_173_962,
    ("resnet34", (32, 32, 3)): 21_282_122,
    ("resnet50", (32, 32, 3)): 23_520_842,
}


def trainable_count(model):
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def test_registry_lists_every_model_and_each_has_a_parameter_count_here():
    assert models.names() == ["lenet300", "lenet5", "resnet18", "resnet34", "resnet50"]
    assert {name for name, _ in TRAINABLE} == set(models.names())  # a new model fails until its count is checked


@pytest.mark.parametrize(("name", "input_shape"), list(TRAINABLE), ids=lambda v: str(v))
def test_native_model_shape_and_parameters(name, input_shape):
    model = models.build_model(name, "native", input_shape, 10)
    assert model.output_shape == (None, 10)
    assert trainable_count(model) == TRAINABLE[(name, input_shape)]
    assert model.name == name
    # the names per-layer rules resolve against without building (models.layer_names), in the builder's order
    built = [layer.name for layer in model.layers if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense))]
    assert sorted(built) == sorted(am_layer_names(name))
    assert [n for n in am_layer_names(name) if n in built] == sorted(built, key=am_layer_names(name).index)


def test_resnet18_batch_norm_statistics_and_forward():
    model = models.build_model("resnet18", "native", (32, 32, 3), 10)
    # 4,800 batch-norm channels, each with a moving mean and variance that are not trained
    assert model.count_params() - trainable_count(model) == 2 * 4_800
    probabilities = model(np.random.default_rng(0).random((2, 32, 32, 3), dtype=np.float32), training=False)
    assert probabilities.shape == (2, 10)
    np.testing.assert_allclose(np.sum(probabilities, axis=1), 1.0, rtol=1e-5)


def test_resnet_layer_names_are_predictable():
    names18 = {layer.name for layer in models.build_model("resnet18", "native", (32, 32, 3), 10).layers}
    assert {"stem_conv", "stem_bn", "stage1_block2_conv2", "stage2_block1_shortcut_conv", "stage4_block2_out",
            "pool", "predictions"} <= names18
    assert "stage1_block1_shortcut_conv" not in names18  # 64 -> 64 channels, stride 1: identity shortcut
    names50 = {layer.name for layer in models.build_model("resnet50", "native", (32, 32, 3), 10).layers}
    assert {"stage1_block1_shortcut_conv", "stage3_block6_conv3", "stage4_block3_bn3"} <= names50


def test_lenet300_takes_flat_and_image_inputs():
    digits = load("digits")
    flat = models.build_model("lenet300", "native", (64,), 10)
    image = models.build_model("lenet300", "native", (8, 8, 1), 10)
    image.set_weights(flat.get_weights())
    np.testing.assert_allclose(image.predict(digits.x_test[:5], verbose=0),
                               flat.predict(digits.x_test[:5].reshape(5, 64), verbose=0), rtol=1e-6)


def test_lenet5_runs_on_8x8_digits_and_refuses_tiny_images():
    model = models.build_model("lenet5", "native", (8, 8, 1), 10)
    assert model.get_layer("upsample").output.shape == (None, 32, 32, 1)
    probabilities = model.predict(load("digits").x_test[:3], verbose=0)
    assert probabilities.shape == (3, 10)
    assert models.build_model("lenet5", "native", (28, 28, 1), 10).get_layer("pad").output.shape == (None, 32, 32, 1)
    with pytest.raises(ValueError, match="lenet5 needs images of at least 4x4 pixels, got 3x3"):
        models.build_model("lenet5", "native", (3, 3, 1), 10)
    with pytest.raises(ValueError, match=r"lenet5 needs image inputs \(height, width, channels\)"):
        models.build_model("lenet5", "native", (64,), 10)


def test_unknown_model_and_multiplier_list_the_valid_ones():
    with pytest.raises(ValueError, match="unknown model 'vgg16'; valid models: lenet300, lenet5, resnet18, "
                                         "resnet34, resnet50"):
        models.build_model("vgg16", "native", (32, 32, 3), 10)
    with pytest.raises(ValueError, match=r"unknown multiplier 'am8'.*am16"):
        models.build_model("lenet300", "am8", (64,), 10)


def test_initial_weights_depend_only_on_the_seed():
    first = models.build_model("lenet5", "native", (8, 8, 1), 10, seed=7).get_weights()
    models.build_model("resnet18", "native", (32, 32, 3), 10, seed=7)  # other models built in between
    again = models.build_model("lenet5", "native", (8, 8, 1), 10, seed=7).get_weights()
    other = models.build_model("lenet5", "native", (8, 8, 1), 10, seed=8).get_weights()
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])
