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
