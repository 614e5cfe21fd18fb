"""The public ops: conv2d and matmul with every product through a simulated multiplier, and their gradients.

    ops.conv2d(x, w, strides=1, padding="SAME", dilations=1, multiplier="am16", exact_gradients=False)
    ops.matmul(a, b, multiplier="am16", exact_gradients=False)

Inputs may be numpy arrays or tensors of any floating dtype: the simulated datapath is fp32 (products through the
multiplier, fp32 accumulation), so inputs are cast to float32 and the result back to the input's dtype. The
multiplier is chosen at run time by name (`ops.names()`) or as "lut:<file>" for an ApproxTrain table. Gradients are
registered: with exact_gradients=False (the default) both gradients go through the multiplier too
(dx = dy (*) w^T, dw = x^T (*) dy, the left operand first); True uses TensorFlow's exact gradients.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ops.modes.arguments import kernel_arguments
from ops.tf_binding import gradients  # noqa: F401  (registers the gradient functions of the ops below)
from ops.tf_binding.library import library


def _as_float32(value, what: str, op: str) -> tuple[tf.Tensor, tf.DType]:
    tensor = tf.convert_to_tensor(value)
    if not tensor.dtype.is_floating:
        raise tf.errors.InvalidArgumentError(
            None, None, f"{op}: {what} must be a floating-point tensor (the simulated datapath is fp32), got dtype "
            f"{tensor.dtype.name} with shape {tensor.shape}")
    return (tensor if tensor.dtype == tf.float32 else tf.cast(tensor, tf.float32)), tensor.dtype


def _pair(value, what: str) -> list[int]:
    values = [int(value)] * 2 if np.ndim(value) == 0 else [int(v) for v in value]
    if len(values) == 4:  # TF's NHWC form [1, h, w, 1]
        values = values[1:3]
    if len(values) != 2 or min(values) < 1:
        raise ValueError(f"{what} must be a positive int, a pair (h, w) or NHWC [1, h, w, 1]; got {value!r}")
    return values


def conv2d(x, w, strides=1, padding="SAME", dilations=1, multiplier="am16", exact_gradients=False, name=None):
    """NHWC x [N, H, W, Cin] conv HWIO w [kh, kw, Cin, Cout] -> [N, Ho, Wo, Cout], every product simulated."""
    attr, table = kernel_arguments(multiplier)
    padding = str(padding).upper()
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    x32, dtype = _as_float32(x, "x", "ops.conv2d")
    w32, _ = _as_float32(w, "w", "ops.conv2d")
    y = library().amdnn_conv2d(x32, w32, table, multiplier=attr, strides=_pair(strides, "strides"),
                               dilations=_pair(dilations, "dilations"), padding=padding,
                               exact_gradients=bool(exact_gradients), name=name)
    return y if dtype == tf.float32 else tf.cast(y, dtype)


def matmul(a, b, multiplier="am16", exact_gradients=False, name=None):
    """a [..., K] x b [K, N] -> [..., N], every product simulated (a is the left operand of each product)."""
    attr, table = kernel_arguments(multiplier)
    a32, dtype = _as_float32(a, "a", "ops.matmul")
    b32, _ = _as_float32(b, "b", "ops.matmul")
    if a32.shape.rank is not None and a32.shape.rank > 2 and b32.shape.rank == 2:
        # Dense layers on [batch, time, features]: fold the leading dimensions into rows.
        leading = tf.shape(a32)[:-1]
        flat = tf.reshape(a32, [-1, tf.shape(a32)[-1]])
        product = library().amdnn_mat_mul(flat, b32, table, multiplier=attr, exact_gradients=bool(exact_gradients))
        product = tf.reshape(product, tf.concat([leading, tf.shape(b32)[-1:]], 0), name=name)
    else:
        product = library().amdnn_mat_mul(a32, b32, table, multiplier=attr, exact_gradients=bool(exact_gradients),
                                          name=name)
    return product if dtype == tf.float32 else tf.cast(product, dtype)


def int_conv2d_codes(x_codes, w_codes, table, zero_a, zero_w, rescale, signed_codes, strides=1, padding="SAME",
                     dilations=1):
    """The integer modes' forward on codes (ops/cc/integer_conv.h): uint8 NHWC x_codes conv uint8 HWIO w_codes, every
    product table[a_byte * 256 + w_byte] (int32 [65536]), exact integer sums with the zero points zero_a (int32 [1])
    and zero_w (int32 [O]), each output fl32(fl32(acc) x rescale[c]). No gradient: the codes are not differentiable
    (ops.keras_integer gives the layer its straight-through gradient)."""
    return library().amdnn_int_conv2d(x_codes, w_codes, table, zero_a, zero_w, rescale,
                                      signed_codes=bool(signed_codes), strides=_pair(strides, "strides"),
                                      dilations=_pair(dilations, "dilations"), padding=str(padding).upper())


def quantise(x, scale, zero, qmin: int, qmax: int):
    """The integer modes' quantiser (ops/cc/integer_quantise.h): (uint8 codes clamp(rint(x / scale) + zero, qmin,
    qmax) as bytes, zero for a NaN or an infinity; bool mask where the clamp did not act). x float32 of any shape,
    scale and zero float32 of 1 value or one per index of x's last axis. No gradient (codes are not
    differentiable)."""
    return library().amdnn_quantise(x, scale, zero, qmin=int(qmin), qmax=int(qmax))


def finite_range(x, per_channel: bool = False):
    """The ranges the integer modes' scales come from (ops/cc/integer_quantise.h), in one pass: (lo, hi, finite),
    lo = min(0, smallest finite value), hi = max(0, largest finite value), subnormals counted as zero, finite: no NaN
    or infinity; float32, float32, bool of shape [1], or per_channel [the size of x's last axis]. No gradient."""
    return library().amdnn_finite_range(x, per_channel=bool(per_channel))


def conv2d_backprop_input(input_shape, w, dy, strides=1, padding="SAME", dilations=1, multiplier="acc32"):
    """dx of conv2d(x, w) for x of `input_shape`: dy (*) w^T through the multiplier (dy the left operand)."""
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_conv2d_backprop_input(tf.cast(input_shape, tf.int32), w, dy, table, multiplier=attr,
                                                 strides=_pair(strides, "strides"),
                                                 dilations=_pair(dilations, "dilations"), padding=str(padding).upper())


def conv2d_backprop_filter(x, filter_shape, dy, strides=1, padding="SAME", dilations=1, multiplier="acc32"):
    """dw of conv2d(x, w) for w of `filter_shape`: im2col(x)^T (*) dy through the multiplier (x the left operand)."""
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_conv2d_backprop_filter(x, tf.cast(filter_shape, tf.int32), dy, table, multiplier=attr,
                                                  strides=_pair(strides, "strides"),
                                                  dilations=_pair(dilations, "dilations"),
                                                  padding=str(padding).upper())
