"""Compiled conv2d and matmul at layer level: forward and both gradients, against TensorFlow (acc32) and against
numpy layers built from the reference products summed in float64 (every other mode); determinism; Keras fit."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import ops
from ops.modes import reference

from tests.ops.kernels import kernel_modes

# (input NHWC, filter HWIO, strides, padding, dilations): strides, both paddings, dilation, odd sizes, 1x1.
CONV_CASES = [
    ((2, 9, 11, 3), (3, 3, 3, 5), (1, 1), "SAME", (1, 1)),
    ((2, 10, 9, 4), (3, 2, 4, 6), (2, 2), "SAME", (1, 1)),
    ((1, 12, 12, 2), (3, 3, 2, 7), (1, 1), "VALID", (2, 2)),
    ((3, 8, 7, 5), (1, 1, 5, 33), (2, 1), "VALID", (1, 1)),
    ((2, 7, 7, 8), (5, 5, 8, 3), (3, 2), "SAME", (1, 1)),
]
MATMUL_CASES = [(7, 13, 5), (64, 300, 100), (33, 1, 65), (5, 200, 1)]


def relative_error(actual, expected) -> float:
    expected = np.asarray(expected, np.float64)
    return float(np.linalg.norm(np.asarray(actual, np.float64) - expected) / max(np.linalg.norm(expected), 1e-30))


def conv_with_gradients(x, w, dy, conv):
    x, w = tf.constant(x), tf.constant(w)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = conv(x, w)
        loss = tf.reduce_sum(y * dy)
    return y.numpy(), tape.gradient(loss, x).numpy(), tape.gradient(loss, w).numpy()


def random_case(shape_x, shape_w, strides, padding, dilations, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape_x).astype(np.float32)
    x[rng.random(shape_x) < 0.3] = 0.0  # ReLU-like zeros
    w = (rng.standard_normal(shape_w) * 0.2).astype(np.float32)
    y_shape = tf.nn.conv2d(x, w, strides, padding, dilations=dilations).shape
    dy = rng.standard_normal(y_shape).astype(np.float32)
    return x, w, dy


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_acc32_conv2d_matches_tensorflow(case):
    shape_x, shape_w, strides, padding, dilations = CONV_CASES[case]
    x, w, dy = random_case(shape_x, shape_w, strides, padding, dilations, seed=case)
    ours = conv_with_gradients(x, w, dy, lambda a, b: ops.conv2d(a, b, strides, padding, dilations, "acc32"))
    # TF's CPU conv gradients reject dilations > 1: the dilated filter with zeros inserted is the same conv.
    dilated = lambda a, b: tf.nn.conv2d(a, b, strides, padding, dilations=dilations)
    tf_y = dilated(x, w).numpy()
    assert relative_error(ours[0], tf_y) <= 1e-5
    if dilations == (1, 1):
        theirs = conv_with_gradients(x, w, dy, dilated)
        for mine, native in zip(ours[1:], theirs[1:]):
            assert relative_error(mine, native) <= 1e-5
    else:
        ref_dx = reference.conv2d_backprop_input(x.shape, w, dy, strides, padding, dilations, "acc32")
        ref_dw = reference.conv2d_backprop_filter(x, w.shape, dy, strides, padding, dilations, "acc32")
        assert relative_error(ours[1], ref_dx) <= 1e-5
        assert relative_error(ours[2], ref_dw) <= 1e-5


@pytest.mark.parametrize("case", range(len(MATMUL_CASES)))
def test_acc32_matmul_matches_tensorflow(case):
    m, k, n = MATMUL_CASES[case]
    rng = np.random.default_rng(case)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    dc = rng.standard_normal((m, n)).astype(np.float32)
    results = []
    for fn in (lambda p, q: ops.matmul(p, q, "acc32"), tf.matmul):
        ta, tb = tf.constant(a), tf.constant(b)
        with tf.GradientTape() as tape:
            tape.watch([ta, tb])
            c = fn(ta, tb)
            loss = tf.reduce_sum(c * dc)
        results.append([c.numpy(), *[g.numpy() for g in tape.gradient(loss, [ta, tb])]])
    for mine, native in zip(*results):
        assert relative_error(mine, native) <= 1e-5


@pytest.mark.parametrize("multiplier", [m for m in kernel_modes() if m != "acc32"])
def test_approximate_conv2d_matches_reference_layers(multiplier):
    for case in (0, 1, 2):
        shape_x, shape_w, strides, padding, dilations = CONV_CASES[case]
        x, w, dy = random_case(shape_x, shape_w, strides, padding, dilations, seed=10 + case)
        y, dx, dw = conv_with_gradients(x, w, dy, lambda a, b: ops.conv2d(a, b, strides, padding, dilations,
                                                                          multiplier))
        assert relative_error(y, reference.conv2d(x, w, strides, padding, dilations, multiplier)) <= 1e-5
        assert relative_error(dx, reference.conv2d_backprop_input(x.shape, w, dy, strides, padding, dilations,
                                                                  multiplier)) <= 1e-5
        assert relative_error(dw, reference.conv2d_backprop_filter(x, w.shape, dy, strides, padding, dilations,
                                                                   multiplier)) <= 1e-5


@pytest.mark.parametrize("multiplier", [m for m in kernel_modes() if m != "acc32"])
def test_approximate_matmul_matches_reference_layers(multiplier):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((37, 150)).astype(np.float32), rng.standard_normal((150, 45)).astype(np.float32)
    dc = rng.standard_normal((37, 45)).astype(np.float32)
    ta, tb = tf.constant(a), tf.constant(b)
    with tf.GradientTape() as tape:
        tape.watch([ta, tb])
        c = ops.matmul(ta, tb, multiplier)
        loss = tf.reduce_sum(c * dc)
    da, db = tape.gradient(loss, [ta, tb])
    assert relative_error(c, reference.matmul(a, b, multiplier)) <= 1e-5
    assert relative_error(da, reference.matmul(dc, b.T, multiplier)) <= 1e-5  # dy (*) w^T
    assert relative_error(db, reference.matmul(a.T, dc, multiplier)) <= 1e-5  # x^T (*) dy
    # The approximate layer is not the exact one: the test can tell the modes apart.
    assert relative_error(c, a.astype(np.float64) @ b) > 1e-4 or multiplier == "fp16"


def test_exact_gradients_switch():
    x, w, dy = random_case((2, 8, 8, 3), (3, 3, 3, 4), (1, 1), "SAME", (1, 1), seed=1)
    _, dx_exact, dw_exact = conv_with_gradients(
        x, w, dy, lambda a, b: ops.conv2d(a, b, multiplier="am16", exact_gradients=True))
    _, dx_tf, dw_tf = conv_with_gradients(x, w, dy, lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"))
    _, dx_am, _ = conv_with_gradients(x, w, dy, lambda a, b: ops.conv2d(a, b, multiplier="am16"))
    np.testing.assert_array_equal(dx_exact, dx_tf)
    np.testing.assert_array_equal(dw_exact, dw_tf)
    assert relative_error(dx_am, dx_tf) > 1e-3  # the default simulates the multiplier backward too
    a, b = x.reshape(16, -1)[:, :12], w.reshape(-1, 4)[:12]
    ta, tb = tf.constant(a), tf.constant(b)
    with tf.GradientTape() as tape:
        tape.watch(ta)
        out = ops.matmul(ta, tb, multiplier="am16", exact_gradients=True)
    np.testing.assert_array_equal(tape.gradient(out, ta).numpy(), np.ones((16, 4), np.float32) @ b.T)


@pytest.mark.parametrize("multiplier", ["acc32", "am16", "am32"])
def test_deterministic_bits(multiplier):
    x, w, dy = random_case((4, 16, 16, 16), (3, 3, 16, 32), (1, 1), "SAME", (1, 1), seed=2)
    conv = lambda a, b: ops.conv2d(a, b, 1, "SAME", 1, multiplier)
    first = conv_with_gradients(x, w, dy, conv)
    for _ in range(2):
        again = conv_with_gradients(x, w, dy, conv)
        for one, other in zip(first, again):
            assert one.tobytes() == other.tobytes()


def test_batched_dense_input_and_dtypes():
    rng = np.random.default_rng(9)
    a = rng.standard_normal((2, 3, 10)).astype(np.float32)
    b = rng.standard_normal((10, 4)).astype(np.float32)
    out = ops.matmul(a, b, "am16").numpy()
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out.reshape(6, 4), ops.matmul(a.reshape(6, 10), b, "am16").numpy())
    half = ops.matmul(a.astype(np.float16), b.astype(np.float16), "acc32")
    assert half.dtype == tf.float16
    doubled = ops.matmul(a.astype(np.float64).reshape(6, 10), b.astype(np.float64), "acc32")
    assert doubled.dtype == tf.float64


def test_keras_fit_trains_through_the_ops():
    """A small conv net whose every multiply goes through am16 trains with model.fit (gradients registered)."""

    class SimulatedConv(tf.keras.layers.Layer):
        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(3, 3, input_shape[-1], 8), initializer="he_normal")

        def call(self, x):
            return tf.nn.relu(ops.conv2d(x, self.kernel, multiplier="am16"))

    class SimulatedDense(tf.keras.layers.Layer):
        def build(self, input_shape):
            self.kernel = self.add_weight(shape=(input_shape[-1], 10), initializer="glorot_uniform")

        def call(self, x):
            return ops.matmul(x, self.kernel, multiplier="am16")

    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images[:512, :, :, None] / 16.0).astype(np.float32)
    y = digits.target[:512]
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((8, 8, 1)), SimulatedConv(), tf.keras.layers.Flatten(),
                                 SimulatedDense()])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), jit_compile=False,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    history = model.fit(x, y, epochs=4, batch_size=64, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert history.history["accuracy"][-1] > 0.8
