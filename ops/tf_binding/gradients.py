"""Gradient functions of the compiled ops, registered with TensorFlow (as TF's own nn_grad.py / math_grad.py do).

Both gradients of a layer are products too and go through the same multiplier by default: for y = x (*) w,
dx = dy (*) w^T and dw = x^T (*) dy, the left operand first (it is the table's first index). With the forward op's
exact_gradients attribute set, TensorFlow's exact gradient ops are used instead. Importing this module registers
them (ops.tf_binding.api does).
"""

from __future__ import annotations

import tensorflow as tf

from ops.tf_binding.library import library


def _nhwc(pair) -> list[int]:
    return [1, int(pair[0]), int(pair[1]), 1]


@tf.RegisterGradient("AmdnnConv2D")
def _conv2d_grad(op, grad):
    x, w, table = op.inputs
    strides, dilations = op.get_attr("strides"), op.get_attr("dilations")
    padding = op.get_attr("padding")
    padding = padding.decode() if isinstance(padding, bytes) else padding
    if op.get_attr("exact_gradients"):
        dx = tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(x), filter=w, out_backprop=grad,
                                            strides=_nhwc(strides), padding=padding, dilations=_nhwc(dilations))
        dw = tf.raw_ops.Conv2DBackpropFilter(input=x, filter_sizes=tf.shape(w), out_backprop=grad,
                                             strides=_nhwc(strides), padding=padding, dilations=_nhwc(dilations))
        return dx, dw, None
    attrs = dict(multiplier=op.get_attr("multiplier"), strides=strides, dilations=dilations, padding=padding)
    dx = library().amdnn_conv2d_backprop_input(tf.shape(x), w, grad, table, **attrs)
    dw = library().amdnn_conv2d_backprop_filter(x, tf.shape(w), grad, table, **attrs)
    return dx, dw, None


@tf.RegisterGradient("AmdnnMatMul")
def _matmul_grad(op, grad):
    a, b, table = op.inputs
    transpose_a, transpose_b = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    if op.get_attr("exact_gradients"):
        def product(left, right, ta=False, tb=False):
            return tf.linalg.matmul(left, right, transpose_a=ta, transpose_b=tb)
    else:
        multiplier = op.get_attr("multiplier")

        def product(left, right, ta=False, tb=False):
            return library().amdnn_mat_mul(left, right, table, multiplier=multiplier, transpose_a=ta, transpose_b=tb)
    # TF's own MatMul gradient, case by case (math_grad._MatMulGrad).
    if not transpose_a and not transpose_b:
        return product(grad, b, tb=True), product(a, grad, ta=True), None
    if not transpose_a and transpose_b:
        return product(grad, b), product(grad, a, ta=True), None
    if transpose_a and not transpose_b:
        return product(b, grad, tb=True), product(a, grad), None
    return product(b, grad, ta=True, tb=True), product(grad, a, ta=True, tb=True), None


# The integer op multiplies codes, and the quantiser makes them: codes have no gradient, the layers take theirs
# from ops.keras_integer (the straight-through estimator, or the table's).
tf.no_gradient("AmdnnIntConv2D")
tf.no_gradient("AmdnnQuantise")
tf.no_gradient("AmdnnFiniteRange")  # the scales it gives are constants to the straight-through gradient
