"""The ops in Keras' conventions on whichever backend Keras runs (KERAS_BACKEND): what the AM layers call.

    keras_ops.conv2d(x, kernel, strides, padding, dilations, multiplier, exact_gradients)   NHWC x, HWIO kernel
    keras_ops.matmul(x, kernel, multiplier, exact_gradients)                                 [..., K] x [K, N]

On the TensorFlow backend these are ops.conv2d / ops.matmul (the TF custom ops, CPU and GPU kernels); on the torch
backend ops.torch_binding.ops (ops.torch_ops: the PyTorch binding of the same kernels, CPU and CUDA), with the
layouts permuted as views: an NHWC tensor is a channels_last NCHW one and an HWIO kernel an OIHW view, so nothing is
copied on the way in, and the channels_last result is NHWC again. The binding loads only when the torch backend
first runs a layer. Other backends (jax, numpy) have no kernels: a clear error names the ones that do.
"""

from __future__ import annotations

import keras

BACKENDS = ("tensorflow", "torch")


def backend() -> str:
    """Keras' backend, if the ops run on it; else ValueError naming the backends they run on."""
    name = keras.backend.backend()
    if name not in BACKENDS:
        raise ValueError(f"the AM layers run on the Keras backends {', '.join(BACKENDS)}; this process runs Keras on "
                         f"{name!r} (set KERAS_BACKEND=tensorflow or KERAS_BACKEND=torch before importing keras)")
    return name


def conv2d(x, kernel, strides, padding: str, dilations, multiplier: str, exact_gradients: bool):
    """NHWC x conv HWIO kernel; strides and dilations an int or an (h, w) pair; padding 'SAME' or 'VALID'."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.conv2d(x, kernel, strides=strides, padding=padding, dilations=dilations, multiplier=multiplier,
                          exact_gradients=exact_gradients)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    x = keras.ops.convert_to_tensor(x)
    kernel = keras.ops.convert_to_tensor(kernel)
    y = torch_ops.conv2d(x.permute(0, 3, 1, 2), kernel.permute(3, 2, 0, 1), stride=strides, padding=padding.lower(),
                         dilation=dilations, multiplier=multiplier, exact_gradients=exact_gradients)
    return y.permute(0, 2, 3, 1)


def matmul(x, kernel, multiplier: str, exact_gradients: bool):
    """x [..., K] times kernel [K, N] -> [..., N], x the left operand of every product."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.matmul(x, kernel, multiplier=multiplier, exact_gradients=exact_gradients)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    return torch_ops.matmul(keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(kernel),
                            multiplier=multiplier, exact_gradients=exact_gradients)


def int_conv2d_codes(x_codes, w_codes, table, zero_a, zero_w, rescale, signed_codes: bool, strides, padding: str,
                     dilations):
    """The integer modes' forward on codes: uint8 NHWC x_codes conv uint8 HWIO w_codes -> float32 NHWC
    (ops/cc/integer_conv.h; ops.keras_integer builds the layers' arithmetic on it)."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.int_conv2d_codes(x_codes, w_codes, table, zero_a, zero_w, rescale, signed_codes, strides=strides,
                                    padding=padding, dilations=dilations)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    return torch_ops.int_conv2d_codes(x_codes, w_codes, table, zero_a, zero_w, rescale, signed_codes, stride=strides,
                                      padding=padding.lower(), dilation=dilations)


def quantise(x, scale, zero, qmin: int, qmax: int):
    """The integer modes' quantiser in one pass: (uint8 codes as bytes, bool mask where the clamp did not act) of
    float32 x by scale and zero (1 value, or one per index of x's last axis); ops/cc/integer_quantise.h."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.quantise(x, scale, zero, qmin, qmax)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    return torch_ops.quantise(x, scale, zero, qmin, qmax)


def finite_range(x, per_channel: bool = False):
    """The integer modes' ranges in one pass: (lo, hi, finite) of float32 x, the min and max of its finite values
    (subnormals as zero) widened to hold 0, and whether every value is finite; shape [1], or per_channel one per
    index of x's last axis (ops/cc/integer_quantise.h)."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.finite_range(x, per_channel)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    return torch_ops.finite_range(keras.ops.convert_to_tensor(x), per_channel)


def conv2d_backprop_input(input_shape, kernel, dy, strides, padding: str, dilations, multiplier: str):
    """dx (NHWC, of `input_shape`) of conv2d(x, kernel): dy (*) kernel^T through the multiplier; kernel HWIO."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.conv2d_backprop_input(input_shape, kernel, dy, strides=strides, padding=padding,
                                         dilations=dilations, multiplier=multiplier)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    n, h, w, c = (int(v) for v in input_shape)
    dx = torch_ops.conv2d_backward_input([n, c, h, w], kernel.permute(3, 2, 0, 1), dy.permute(0, 3, 1, 2),
                                         stride=strides, padding=padding.lower(), dilation=dilations,
                                         multiplier=multiplier)
    return dx.permute(0, 2, 3, 1)


def conv2d_backprop_filter(x, kernel_shape, dy, strides, padding: str, dilations, multiplier: str):
    """dkernel (HWIO, of `kernel_shape`) of conv2d(x, kernel): im2col(x)^T (*) dy through the multiplier; x NHWC."""
    if backend() == "tensorflow":
        from ops.tf_binding import api  # here, not at the top: a torch-backend process loads no TensorFlow

        return api.conv2d_backprop_filter(x, kernel_shape, dy, strides=strides, padding=padding,
                                          dilations=dilations, multiplier=multiplier)
    from ops.torch_binding import ops as torch_ops  # here, not at the top: a TF-backend process loads no torch

    kh, kw, i, o = (int(v) for v in kernel_shape)
    dw = torch_ops.conv2d_backward_filter(x.permute(0, 3, 1, 2), [o, i, kh, kw], dy.permute(0, 3, 1, 2),
                                          stride=strides, padding=padding.lower(), dilation=dilations,
                                          multiplier=multiplier)
    return dw.permute(2, 3, 1, 0)
