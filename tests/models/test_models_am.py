"""AM models: native weights load into them, they serialise with their multiplier, convert_model keeps weights,
acc32 matches native, am16 trains."""

import numpy as np
import pytest
import keras
import tensorflow as tf

import models
from models import AMConv2D, AMDense, convert_model
from models.datasets import batches, load


def _random_weights(model, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.3, w.shape).astype(np.float32) for w in model.get_weights()]


def _weight_layers(model):
    return [layer for layer in model.layers if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense))]


def test_native_weights_load_into_an_am_model():
    native = models.build_model("lenet5", "native", (8, 8, 1), 10, seed=0)
    native.set_weights(_random_weights(native))
    am = models.build_model("lenet5", "am16", (8, 8, 1), 10, seed=1)
    assert [type(layer) for layer in _weight_layers(am)] == [AMConv2D, AMConv2D, AMDense, AMDense, AMDense]
    assert not any(isinstance(layer, (AMConv2D, AMDense)) for layer in native.layers)
    assert [w.path for w in am.weights] == [w.path for w in native.weights]
    assert [w.path for w in am.weights][:2] == ["conv1/kernel", "conv1/bias"]
    am.set_weights(native.get_weights())
    for a, n in zip(am.weights, native.weights):
        assert a.shape == n.shape
        np.testing.assert_array_equal(a.numpy(), n.numpy())
    assert am.get_layer("conv1").kernel.shape == (5, 5, 1, 6)  # HWIO
    assert am.get_layer("fc1").kernel.shape == (400, 120)  # [in, out]


def test_am_layers_serialise_with_their_multiplier(tmp_path):
    model = models.build_model("lenet5", "mit16", (8, 8, 1), 10, exact_gradients=True)
    config = model.get_layer("conv2").get_config()
    assert config["multiplier"] == "mit16" and config["exact_gradients"] is True
    rebuilt = AMConv2D.from_config(config)
    assert (rebuilt.multiplier, rebuilt.filters, rebuilt.kernel_size) == ("mit16", 16, (5, 5))
    path = tmp_path / "lenet5.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert [(type(l).__name__, l.multiplier) for l in _weight_layers(loaded)] == [
        (type(l).__name__, "mit16") for l in _weight_layers(model)]
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_am_models_never_use_xla():
    model = models.build_model("lenet300", "am16", (64,), 10)
    assert all(not layer.supports_jit for layer in _weight_layers(model))
    with pytest.warns(UserWarning, match="doesn't support `jit_compile=True`"):
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", jit_compile=True)
    assert model.jit_compile is False


def test_am_layers_refuse_what_the_ops_cannot_do():
    with pytest.raises(ValueError, match="channels_last"):
        AMConv2D(4, 3, multiplier="am16", data_format="channels_first")
    with pytest.raises(ValueError, match="groups=1 only"):
        AMConv2D(4, 3, multiplier="am16", groups=2)
    with pytest.raises(ValueError, match="for 'native' use keras.layers.Dense"):
        AMDense(4, multiplier="native")


def test_convert_model_keeps_weights_and_converts_back():
    native = models.build_model("lenet5", "native", (8, 8, 1), 10)
    native.set_weights(_random_weights(native, 1))
    am = convert_model(native, "am32")
    assert [(type(l), l.multiplier) for l in _weight_layers(am)] == [(AMConv2D, "am32")] * 2 + [(AMDense, "am32")] * 3
    assert [l.name for l in am.layers] == [l.name for l in native.layers]
    back = convert_model(am, "native")
    assert [type(l) for l in _weight_layers(back)] == [keras.layers.Conv2D] * 2 + [keras.layers.Dense] * 3
    for model in (am, back):
        for a, b in zip(model.get_weights(), native.get_weights()):
            np.testing.assert_array_equal(a, b)


def test_convert_model_handles_sequential_and_nested_models():
    inner = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu", name="inner_dense")],
                             name="inner")
    inputs = keras.Input((6,))
    outputs = keras.layers.Dense(3, name="head")(inner(inputs))
    outer = keras.Model(inputs, outputs)
    am = convert_model(outer, "acc32")
    assert type(am.get_layer("inner").get_layer("inner_dense")) is AMDense
    assert type(am.get_layer("head")) is AMDense
    x = np.random.default_rng(2).random((4, 6), dtype=np.float32)
    np.testing.assert_allclose(am(x).numpy(), outer(x).numpy(), rtol=1e-5, atol=1e-6)


def test_convert_model_refuses_subclassed_models():
    class Custom(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    model = Custom()
    model(np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match="functional and sequential Keras models, not a subclassed Custom"):
        convert_model(model, "am16")


def _logits_model(model):
    """The same layers up to the classifier's pre-softmax output (softmax hides relative differences of logits)."""
    head = model.get_layer("predictions")
    logits = head.__class__.from_config({**head.get_config(), "activation": None, "name": "logits"})
    out = logits(head.input)
    logits.set_weights(head.get_weights())
    return keras.Model(model.input, out)


@pytest.mark.parametrize(("name", "input_shape", "batch"), [("lenet300", (8, 8, 1), 16), ("lenet5", (8, 8, 1), 16),
                                                            ("resnet18", (32, 32, 3), 1)])
def test_acc32_matches_native(name, input_shape, batch):
    native = models.build_model(name, "native", input_shape, 10, seed=3)
    am = models.build_model(name, "acc32", input_shape, 10, seed=3)
    am.set_weights(native.get_weights())
    x = np.random.default_rng(4).random((batch, *input_shape), dtype=np.float32)
    expected = _logits_model(native)(x, training=False).numpy()
    actual = _logits_model(am)(x, training=False).numpy()
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(expected))))


def test_acc32_gradients_match_native():
    native = models.build_model("lenet5", "native", (8, 8, 1), 10, seed=5)
    am = models.build_model("lenet5", "acc32", (8, 8, 1), 10, seed=5)
    am.set_weights(native.get_weights())
    digits = load("digits")
    x, y = digits.x_train[:16], digits.y_train[:16]
    loss = keras.losses.SparseCategoricalCrossentropy()
    grads = []
    for model in (native, am):
        with tf.GradientTape() as tape:
            value = loss(y, model(x, training=True))
        grads.append(tape.gradient(value, model.trainable_weights))
    for g_native, g_am in zip(*grads):
        scale = float(tf.reduce_max(tf.abs(g_native)))
        np.testing.assert_allclose(g_am.numpy(), g_native.numpy(), rtol=1e-4, atol=1e-5 * scale)


def test_am16_training_on_digits_reduces_the_loss():
    digits = load("digits")
    model = models.build_model("lenet300", "am16", digits.input_shape, digits.num_classes, seed=0)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=False)
    x_eval, y_eval = digits.x_train[:512], digits.y_train[:512]
    before = model.evaluate(x_eval, y_eval, verbose=0, return_dict=True)
    for epoch in range(2):
        for _, x, y in batches(digits, 32, seed=0, epoch=epoch):
            model.train_on_batch(x, y)
    after = model.evaluate(x_eval, y_eval, verbose=0, return_dict=True)
    assert after["loss"] < 0.5 * before["loss"], (before, after)
    assert after["accuracy"] > 0.8


@pytest.mark.parametrize("settings", [dict(strides=(1, 2), padding="valid"), dict(strides=2, padding="same"),
                                      dict(dilation_rate=2, padding="same")], ids=str)
def test_am_conv_settings_match_native_conv(settings):
    x = np.random.default_rng(6).random((2, 9, 10, 3), dtype=np.float32)
    native = keras.layers.Conv2D(4, 3, **settings)
    am = AMConv2D(4, 3, multiplier="acc32", **settings)
    expected = native(x).numpy()
    am.build(x.shape)
    am.set_weights(native.get_weights())
    np.testing.assert_allclose(am(x).numpy(), expected, rtol=1e-5, atol=1e-5)
