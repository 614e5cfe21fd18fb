"""Bad input to the ops gets an error that says what was wrong; zero-size tensors work; nothing crashes."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import ops
from ops.tf_binding.library import library


def test_unknown_multiplier_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        ops.matmul(np.ones((2, 2)), np.ones((2, 2)), multiplier="am8")
    for name in ops.names(include_native=False):
        assert name in str(error.value)
    assert "lut:" in str(error.value)


def test_native_is_not_a_simulated_mode():
    with pytest.raises(ValueError, match="tf.nn.conv2d"):
        ops.conv2d(np.ones((1, 2, 2, 1)), np.ones((1, 1, 1, 1)), multiplier="native")


def test_the_compiled_op_rejects_unknown_names_too():
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown multiplier 'bogus'; valid: acc32"):
        library().amdnn_mat_mul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.zeros(0, np.uint8),
                                multiplier="bogus")


def test_wrongly_sized_table_names_file_and_sizes(tmp_path):
    path = tmp_path / "broken.bin"
    path.write_bytes(bytes(1000))
    with pytest.raises(ValueError) as error:
        ops.matmul(np.ones((2, 2)), np.ones((2, 2)), multiplier=f"lut:{path}")
    assert str(path) in str(error.value) and "16384" in str(error.value) and "1000" in str(error.value)
    with pytest.raises(Exception, match=str(tmp_path / "missing.bin")):
        ops.matmul(np.ones((2, 2)), np.ones((2, 2)), multiplier=f"lut:{tmp_path / 'missing.bin'}")


def test_the_compiled_op_checks_table_bytes():
    with pytest.raises(tf.errors.InvalidArgumentError, match="4096 or 16384\\), got 5"):
        library().amdnn_mat_mul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), np.zeros(5, np.uint8),
                                multiplier="table")
    bad = np.full(16, 0x05, np.uint8)  # m = 2, but M = 5 needs 3 bits
    with pytest.raises(tf.errors.InvalidArgumentError, match="more than 2 bits"):
        library().amdnn_mat_mul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), bad, multiplier="table")


def test_mismatched_shapes_name_the_shapes():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[3,4\].*\[5,6\]"):
        ops.matmul(np.ones((3, 4)), np.ones((5, 6)), multiplier="am16")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input channels 3 differ from filter input channels 2"):
        ops.conv2d(np.ones((1, 5, 5, 3)), np.ones((3, 3, 2, 4)), multiplier="am16")


def test_wrong_ranks_name_the_shapes():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[5,5,3\]"):
        ops.conv2d(np.ones((5, 5, 3)), np.ones((3, 3, 3, 4)), multiplier="am16")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"2-D"):
        ops.matmul(np.ones((2, 3)), np.ones((3, 4, 5)), multiplier="am16")


def test_non_float_dtypes_are_invalid_arguments():
    with pytest.raises(tf.errors.InvalidArgumentError, match="int32 with shape \\(2, 2\\)"):
        ops.matmul(np.ones((2, 2), np.int32), np.ones((2, 2), np.float32), multiplier="am16")
    with pytest.raises(tf.errors.InvalidArgumentError, match="floating-point"):
        ops.conv2d(tf.ones((1, 3, 3, 1), tf.int64), np.ones((1, 1, 1, 1), np.float32), multiplier="acc32")


def test_valid_padding_larger_filter_is_an_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="smaller than the dilated filter"):
        ops.conv2d(np.ones((1, 2, 2, 1)), np.ones((3, 3, 1, 1)), padding="VALID", multiplier="am16")


@pytest.mark.parametrize("shapes", [((0, 5, 5, 3), (3, 3, 3, 4)), ((2, 5, 5, 0), (3, 3, 0, 4)),
                                    ((2, 5, 5, 3), (3, 3, 3, 0)), ((2, 0, 5, 3), (3, 3, 3, 4))])
def test_zero_size_conv(shapes):
    shape_x, shape_w = shapes
    x, w = tf.zeros(shape_x), tf.random.normal(shape_w)
    with tf.GradientTape() as tape:
        tape.watch([x, w])
        y = ops.conv2d(x, w, multiplier="am16")
        loss = tf.reduce_sum(y)
    expected_shape = (shape_x[0], shape_x[1], shape_x[2], shape_w[3])  # SAME, stride 1
    assert tuple(y.shape) == expected_shape
    np.testing.assert_array_equal(y.numpy(), np.zeros(expected_shape))
    dx, dw = tape.gradient(loss, [x, w])
    assert dx.shape == x.shape and dw.shape == w.shape
    assert not np.any(dw.numpy())


@pytest.mark.parametrize("shapes", [((0, 4), (4, 3)), ((3, 0), (0, 5)), ((3, 4), (4, 0))])
def test_zero_size_matmul(shapes):
    a, b = tf.ones(shapes[0]), tf.ones(shapes[1])
    with tf.GradientTape() as tape:
        tape.watch([a, b])
        c = ops.matmul(a, b, multiplier="mit16")
        loss = tf.reduce_sum(c)
    assert c.shape == (shapes[0][0], shapes[1][1])
    np.testing.assert_array_equal(c.numpy(), np.zeros(c.shape))
    da, db = tape.gradient(loss, [a, b])
    assert da.shape == a.shape and db.shape == b.shape


def test_inf_and_nan_propagate_through_layers():
    x = np.ones((1, 3, 3, 1), np.float32)
    x[0, 1, 1, 0] = np.inf
    w = np.ones((1, 1, 1, 2), np.float32)
    w[..., 1] = 0.0
    y = ops.conv2d(x, w, multiplier="am16").numpy()
    assert np.isinf(y[0, 1, 1, 0]) and np.isnan(y[0, 1, 1, 1])  # inf x 1 = inf, inf x 0 = NaN
    assert np.all(y[0, 0, :, 0] == np.float32(ops.product(np.float32(1), np.float32(1), "am16")))
