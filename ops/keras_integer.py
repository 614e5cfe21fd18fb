"""The integer modes' arithmetic in Keras ops, on whichever backend Keras runs: what the integer layers call.

    conv2d(x, kernel, mode, activation_range, strides, padding, dilations, scheme=None)   NHWC x, HWIO kernel
    dense(x, kernel, mode, activation_range, scheme=None)                                  [..., K] x [K, N]
    tensor_range(x), update_running_range(running, batch)                                 the activation range

The section "Integer modes (8-bit, table products)" of docs/multipliers-spec.md, step for step: ranges, scales and
zero points, the quantiser, the forward through the compiled op on the codes (ops.keras_ops.int_conv2d_codes:
table products, exact integer sums, rescale) and the straight-through gradient through `acc32`'s products (the
conv's gradient kernels; Dense's matmuls), masked where the quantiser clamped. ops/modes/integer_reference.py is
the numpy reference it is tested against.
Every fp32 operation is one Keras op (one rounding: no op here fuses a multiply and an add), rounding to an integer
is keras.ops.round (ties to even on both backends, as the spec's rint), and subnormal inputs are flushed first, so
the codes, zero points and scales are the reference's bits on any backend and device. The bias is the layer's.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops as K

from ops import keras_ops
from ops.modes.integer_reference import MOMENTUM, SMALLEST_NORMAL, CodeSpace, IntegerMode, code_space

_GRADIENT_MODE = "acc32"  # the straight-through gradient's products (the spec's "Gradients")
# (value's fp32 bytes, device) -> the 0-d float32 tensor of _scalar on the torch backend.
_SCALARS: dict[tuple[bytes, str], object] = {}


def scalar(value, like):
    """The fp32 number `value` for an op with the tensor `like`: the number itself on TensorFlow; on torch a 0-d
    tensor on like's device, made once per device. A step captured as a CUDA graph (the torch engine's) cannot copy a
    Python number to the GPU, which Keras' torch ops do for every number they are given; the eager warm-up steps
    before the capture make these tensors, and the capture reuses them."""
    if keras.backend.backend() != "torch":
        return value
    key = (np.float32(value).tobytes(), str(like.device))
    if key not in _SCALARS:
        import torch  # the torch backend is running: torch is loaded

        _SCALARS[key] = torch.tensor(float(value), dtype=torch.float32, device=like.device)
    return _SCALARS[key]


def table_entries(mode: IntegerMode) -> np.ndarray:
    """The mode's table as the op's 65536 int32 entries, T[a_byte * 256 + w_byte] (read-only)."""
    entries = np.ascontiguousarray(mode.table, dtype=np.int32).reshape(-1)
    entries.setflags(write=False)
    return entries


def _flushed(x):
    """Subnormal values counted as zero (the spec lets kernels run with denormals-are-zero)."""
    return K.where(K.less(K.abs(x), scalar(SMALLEST_NORMAL, x)), K.zeros_like(x), x)


def tensor_range(x, per_channel: bool = False):
    """(lo, hi) float32: min(0, smallest finite element), max(0, largest finite element); per_channel: one pair per
    index of the last axis (weights' output channels)."""
    x = _flushed(K.cast(x, "float32"))
    x = K.where(K.isfinite(x), x, K.zeros_like(x))
    axis = tuple(range(len(x.shape) - 1)) if per_channel else None
    zero = scalar(0.0, x)
    return K.minimum(K.min(x, axis=axis), zero), K.maximum(K.max(x, axis=axis), zero)


def all_finite(x):
    """A boolean scalar: no NaN or infinity in x (a batch that has one leaves the running range unchanged)."""
    return K.all(K.isfinite(x))


def update_running_range(running_lo, running_hi, batch_lo, batch_hi):
    """One training step's update of an activation range: each bound fl32(fl32(mu x R) + fl32(nu x r)), two
    products and a sum, each rounded (mu = fl32(0.99), nu = 1 - mu exact)."""
    mu = scalar(np.float32(MOMENTUM), running_lo)
    nu = scalar(np.float32(1) - np.float32(MOMENTUM), running_lo)
    return (K.add(K.multiply(mu, running_lo), K.multiply(nu, batch_lo)),
            K.add(K.multiply(mu, running_hi), K.multiply(nu, batch_hi)))


def scales(lo, hi, codes: CodeSpace):
    """(s float32, z float32 holding an integer) of each range (integer_reference.scales_from_range)."""
    width = K.maximum(K.negative(lo), hi) if codes.scheme == "symmetric" else K.subtract(hi, lo)
    s = K.divide(width, scalar(codes.steps, width))
    s = K.where(K.less(s, scalar(SMALLEST_NORMAL, s)), K.ones_like(s), s)
    if codes.scheme == "symmetric":
        z = K.add(K.zeros_like(s), scalar(0.0 if codes.kind == "signed" else 128.0, s))
    else:
        z = K.clip(K.add(scalar(codes.qmin, s), K.round(K.divide(K.negative(lo), s))), scalar(codes.qmin, s),
                   scalar(codes.qmax, s))
    return s, z


def _unclamped(x, s, z):
    """rint(fl32(x / s)) + z, float32 (+-inf where the quotient overflows, NaN for a NaN x)."""
    return K.add(K.round(K.divide(_flushed(x), s)), z)


def quantise(x, s, z, codes: CodeSpace):
    """float32 codes clamp(rint(fl32(x / s)) + z, qmin, qmax), z for a non-finite x, and the straight-through mask
    (True where the clamp did not act; False for a non-finite x)."""
    unclamped = _unclamped(x, s, z)
    finite = K.isfinite(x)
    qmin, qmax = scalar(codes.qmin, x), scalar(codes.qmax, x)
    q = K.where(finite, K.clip(unclamped, qmin, qmax), K.broadcast_to(z, K.shape(x)))
    mask = K.logical_and(finite, K.logical_and(K.greater_equal(unclamped, qmin), K.less_equal(unclamped, qmax)))
    return q, mask


def _as_bytes(q):
    """float32 codes -> uint8 bytes (a signed code by its two's complement: -1 is 255)."""
    return K.cast(K.where(K.less(q, scalar(0.0, q)), K.add(q, scalar(256.0, q)), q), "uint8")


def _quantised_step(x, kernel, codes: CodeSpace, activation_range, forward):
    """The layer's forward on x and a kernel whose last axis is the output channels: scales, codes and rescale;
    forward(x_bytes, w_bytes, zero_a, zero_w, rescale) runs the table op. Returns y and what the gradients read:
    the dequantised operands x', w' and the straight-through masks."""
    s_a, z_a = scales(*activation_range, codes)
    s_w, z_w = scales(*tensor_range(kernel, per_channel=True), codes)
    # fl32(s_a x s_w[c]), flushed; NaN where x or channel c of the kernel holds a NaN or an infinity (spec, Outputs).
    rescale = K.multiply(s_a, s_w)
    rescale = K.where(K.less(rescale, scalar(SMALLEST_NORMAL, rescale)), K.zeros_like(rescale), rescale)
    bad_channels = K.logical_not(K.all(K.isfinite(kernel), axis=tuple(range(len(kernel.shape) - 1))))
    rescale = K.where(K.logical_or(bad_channels, K.logical_not(all_finite(x))), scalar(float("nan"), rescale),
                      rescale)

    q_x, mask_x = quantise(x, s_a, z_a, codes)
    q_w, mask_w = quantise(kernel, s_w, z_w, codes)
    y = forward(_as_bytes(q_x), _as_bytes(q_w), K.reshape(K.cast(z_a, "int32"), (1,)), K.cast(z_w, "int32"),
                rescale)
    # x' = fl32((q - z) x s): |q - z| < 2^9, one rounding; computed when the gradient is, not at every forward
    dequantised = lambda: (K.multiply(K.subtract(q_x, z_a), s_a), K.multiply(K.subtract(q_w, z_w), s_w))
    return y, dequantised, mask_x, mask_w


def _layer_setup(mode: IntegerMode, scheme, table, activation_range):
    """What conv2d and dense read before their step: the codes, the table as a tensor (table_entries when the layer
    passes none), the activation range cut from the gradient, and whether the codes are signed."""
    codes = code_space(mode, scheme)
    if table is None:
        table = K.convert_to_tensor(table_entries(mode))
    lo, hi = (K.stop_gradient(K.cast(bound, "float32")) for bound in activation_range)
    return codes, table, (lo, hi), codes.kind == "signed"


def _masked(dx, dw, mask_x, mask_w):
    """The straight-through gradients: zero where the quantiser clamped (or the operand was not finite)."""
    return K.where(mask_x, dx, K.zeros_like(dx)), K.where(mask_w, dw, K.zeros_like(dw))


def _with_gradient(x, kernel, step):
    """step(x, kernel) -> (y, gradients(upstream) -> (dx, dkernel)) as one differentiable function of x, kernel."""

    @K.custom_gradient
    def run(x, kernel):
        y, gradients = step(x, kernel)

        def grad(*args, upstream=None):  # TensorFlow passes upstream positionally, torch by keyword
            if upstream is None:
                (upstream,) = args
            return gradients(upstream)

        return y, grad

    return run(K.cast(x, "float32"), K.cast(kernel, "float32"))


def conv2d(x, kernel, mode: IntegerMode, activation_range, strides, padding: str, dilations, scheme=None,
           table=None):
    """NHWC x conv HWIO kernel under the integer mode: float32 [N, Ho, Wo, O] without bias. activation_range (lo,
    hi) quantises x (the layer's running range, or the batch's own); the kernel's range is its own, per output
    channel. `table` is the mode's entries as a tensor on x's device (table_entries, made once by the layer)."""
    codes, table, activation_range, signed = _layer_setup(mode, scheme, table, activation_range)

    def step(x, kernel):
        forward = lambda xb, wb, z_a, z_w, rescale: keras_ops.int_conv2d_codes(
            xb, wb, table, z_a, z_w, rescale, signed, strides, padding, dilations)
        y, dequantised, mask_x, mask_w = _quantised_step(x, kernel, codes, activation_range, forward)

        def gradients(upstream):  # acc32's conv gradients: dx through w', dw through x'
            x_hat, w_hat = dequantised()
            dx = keras_ops.conv2d_backprop_input(K.shape(x), w_hat, upstream, strides, padding, dilations,
                                                 _GRADIENT_MODE)
            dw = keras_ops.conv2d_backprop_filter(x_hat, K.shape(kernel), upstream, strides, padding, dilations,
                                                  _GRADIENT_MODE)
            return _masked(dx, dw, mask_x, mask_w)

        return y, gradients

    return _with_gradient(x, kernel, step)


def dense(x, kernel, mode: IntegerMode, activation_range, scheme=None, table=None):
    """x [..., K] times kernel [K, N] under the integer mode. The forward is the 1 x 1 conv of a 1 x 1 image per
    row; the gradients are acc32's matmuls, dx = dy w'^T and dw = x'^T dy: the same products and sums as the conv's
    gradient kernels (the spec's), about 5x faster on a 1 x 1 image (784 -> 300 at batch 128: 2.8 against 15 ms on
    2 AVX2 cores)."""
    codes, table, activation_range, signed = _layer_setup(mode, scheme, table, activation_range)
    n_in, n_out = K.shape(kernel)[-2], K.shape(kernel)[-1]
    rows = K.reshape(x, (-1, n_in))

    def step(rows, kernel):
        forward = lambda xb, wb, z_a, z_w, rescale: K.reshape(keras_ops.int_conv2d_codes(
            K.reshape(xb, (-1, 1, 1, n_in)), K.reshape(wb, (1, 1, n_in, n_out)), table, z_a, z_w, rescale, signed,
            1, "VALID", 1), (-1, n_out))
        y, dequantised, mask_x, mask_w = _quantised_step(rows, kernel, codes, activation_range, forward)

        def gradients(upstream):
            x_hat, w_hat = dequantised()
            dx = keras_ops.matmul(upstream, K.transpose(w_hat), _GRADIENT_MODE, exact_gradients=False)
            dw = keras_ops.matmul(K.transpose(x_hat), upstream, _GRADIENT_MODE, exact_gradients=False)
            return _masked(dx, dw, mask_x, mask_w)

        return y, gradients

    y = _with_gradient(rows, kernel, step)
    return K.reshape(y, (*K.shape(x)[:-1], n_out))
