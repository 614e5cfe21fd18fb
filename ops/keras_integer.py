"""The integer modes' arithmetic in Keras ops, on whichever backend Keras runs: what the integer layers call.

    conv2d(x, kernel, mode, activation_range, strides, padding, dilations, scheme=None)   NHWC x, HWIO kernel
    dense(x, kernel, mode, activation_range, scheme=None)                                  [..., K] x [K, N]
        (either with table_gradients=True: the backward through the table, conv2d_table_gradients)
    finite_range(x), update_running_range(running, batch)          the activation range (and x's finiteness)

The section "Integer modes (8-bit, table products)" of docs/multipliers-spec.md, step for step: ranges, scales and
zero points, the quantiser (the compiled ops.keras_ops.quantise: codes and masks in one pass), the forward through
the compiled op on the codes (ops.keras_ops.int_conv2d_codes: table products, exact integer sums, rescale) and the straight-through gradient through `acc32`'s products (the
conv's gradient kernels; Dense's matmuls), masked where the quantiser clamped, or with table_gradients the
section's "Gradients through the table" as two more runs of the op on codes. ops/modes/integer_reference.py is
the numpy reference it is tested against.
Every fp32 operation is one Keras op (one rounding: no op here fuses a multiply and an add), rounding to an integer
is keras.ops.round (ties to even on both backends, as the spec's rint; the quantiser's rintf likewise), and subnormal
inputs are flushed first, so the codes, zero points and scales are the reference's bits on any backend and device.
The bias is the layer's.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops as K

from ops import keras_ops
from ops.modes.integer_reference import MOMENTUM, SMALLEST_NORMAL, CodeSpace, IntegerMode, axis_pair, code_space
from ops.modes.reference import output_size

_GRADIENT_MODE = "acc32"  # the straight-through gradient's products (the spec's "Gradients")
_MAX_TAPS = 32768  # taps per output of one run of the op on codes (ops/cc/integer_conv.h, kIntMaxTaps)
# Taps past which the GPU's op runs a conv unsplit, on as few blocks as it has output tiles (integer_conv_cuda.cu,
# kSplitMaxTaps): a filter gradient's sums are that long (ResNet-18's first stage at batch 128 on 28 x 28: 100,352
# taps, 64 x 9 x 64 outputs); on a GPU the table gradients cut them into slices this long.
_GPU_SLICE_TAPS = 8192
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


def finite_range(x, per_channel: bool = False):
    """(lo, hi, finite): min(0, smallest finite element), max(0, largest finite element) as float32, subnormals
    counted as zero, and whether every element is finite; scalars, or per_channel one per index of the last axis
    (weights' output channels). One pass of the compiled op (ops/cc/integer_quantise.h) where a composition of Keras
    ops took about 11."""
    lo, hi, finite = keras_ops.finite_range(K.cast(x, "float32"), per_channel)
    if per_channel:
        return lo, hi, finite
    return K.reshape(lo, ()), K.reshape(hi, ()), K.reshape(finite, ())


def tensor_range(x, per_channel: bool = False):
    """(lo, hi) float32 of finite_range."""
    return finite_range(x, per_channel)[:2]


def all_finite(x):
    """A boolean scalar: no NaN or infinity in x (a batch that has one leaves the running range unchanged)."""
    return finite_range(x)[2]


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


def quantise(x, s, z, codes: CodeSpace):
    """The codes clamp(rint(fl32(x / s)) + z, qmin, qmax) as uint8 bytes (a signed code by its two's complement: -1
    is 255), z for a non-finite x, and the straight-through mask (True where the clamp did not act; False for a
    non-finite x): one pass of the compiled quantiser (ops/cc/integer_quantise.h) where a composition of Keras ops
    took about 15."""
    return keras_ops.quantise(K.cast(x, "float32"), s, z, codes.qmin, codes.qmax)


def _values(codes, signed: bool):
    """uint8 bytes -> the codes' values as float32 (a signed code's byte read as two's complement)."""
    values = K.cast(codes, "float32")
    if not signed:
        return values
    return K.where(K.greater_equal(values, scalar(128.0, values)), K.subtract(values, scalar(256.0, values)), values)


def _as_bytes(q):
    """float32 codes -> uint8 bytes (a signed code by its two's complement: -1 is 255)."""
    return K.cast(K.where(K.less(q, scalar(0.0, q)), K.add(q, scalar(256.0, q)), q), "uint8")


def _quantised_step(x, kernel, codes: CodeSpace, activation_range, forward, input_finite=None):
    """The layer's forward on x and a kernel whose last axis is the output channels: scales, codes and rescale;
    forward(x_bytes, w_bytes, zero_a, zero_w, rescale) runs the table op. input_finite: whether x is all finite,
    when the caller knows (else computed). Returns y and what the gradients read: a _Quantised."""
    s_a, z_a = scales(*activation_range, codes)
    w_lo, w_hi, w_finite = finite_range(kernel, per_channel=True)
    s_w, z_w = scales(w_lo, w_hi, codes)
    # fl32(s_a x s_w[c]), flushed; NaN where x or channel c of the kernel holds a NaN or an infinity (spec, Outputs).
    rescale = K.multiply(s_a, s_w)
    rescale = K.where(K.less(rescale, scalar(SMALLEST_NORMAL, rescale)), K.zeros_like(rescale), rescale)
    x_finite = all_finite(x) if input_finite is None else input_finite
    rescale = K.where(K.logical_and(w_finite, x_finite), rescale, scalar(float("nan"), rescale))

    b_x, mask_x = quantise(x, s_a, z_a, codes)
    b_w, mask_w = quantise(kernel, s_w, z_w, codes)
    y = forward(b_x, b_w, K.reshape(K.cast(z_a, "int32"), (1,)), K.cast(z_w, "int32"), rescale)
    return y, _Quantised(b_x, s_a, z_a, b_w, s_w, z_w, mask_x, mask_w, codes.kind == "signed")


class _Quantised:
    """What a layer's gradients read of its forward: the codes (uint8 bytes; q_x and q_w their values as float32),
    scales and zero points of x and w, and the straight-through masks."""

    def __init__(self, b_x, s_a, z_a, b_w, s_w, z_w, mask_x, mask_w, signed: bool):
        self.b_x, self.s_a, self.z_a, self.b_w, self.s_w, self.z_w = b_x, s_a, z_a, b_w, s_w, z_w
        self.mask_x, self.mask_w, self.signed = mask_x, mask_w, signed

    @property
    def q_x(self):
        return _values(self.b_x, self.signed)

    @property
    def q_w(self):
        return _values(self.b_w, self.signed)

    def dequantised(self):
        """x' = fl32((q - z) x s), w' likewise: |q - z| < 2^9, one rounding; computed when the gradient is, not at
        every forward."""
        return (K.multiply(K.subtract(self.q_x, self.z_a), self.s_a),
                K.multiply(K.subtract(self.q_w, self.z_w), self.s_w))


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
           table=None, table_gradients=False, input_finite=None):
    """NHWC x conv HWIO kernel under the integer mode: float32 [N, Ho, Wo, O] without bias. activation_range (lo,
    hi) quantises x (the layer's running range, or the batch's own); the kernel's range is its own, per output
    channel. `table` is the mode's entries as a tensor on x's device (table_entries, made once by the layer).
    table_gradients: the backward through the table too (conv2d_table_gradients), else straight-through.
    input_finite: whether x is all finite, where the caller has it from x's range pass (else computed here)."""
    codes, table, activation_range, signed = _layer_setup(mode, scheme, table, activation_range)

    def step(x, kernel):
        forward = lambda xb, wb, z_a, z_w, rescale: keras_ops.int_conv2d_codes(
            xb, wb, table, z_a, z_w, rescale, signed, strides, padding, dilations)
        y, q = _quantised_step(x, kernel, codes, activation_range, forward, input_finite)

        def gradients(upstream):
            if table_gradients:
                dx, dw = conv2d_table_gradients(x, kernel, upstream, q, codes, table, strides, padding, dilations)
                return _masked(dx, dw, q.mask_x, q.mask_w)
            # acc32's conv gradients: dx through w', dw through x'
            x_hat, w_hat = q.dequantised()
            dx = keras_ops.conv2d_backprop_input(K.shape(x), w_hat, upstream, strides, padding, dilations,
                                                 _GRADIENT_MODE)
            dw = keras_ops.conv2d_backprop_filter(x_hat, K.shape(kernel), upstream, strides, padding, dilations,
                                                  _GRADIENT_MODE)
            return _masked(dx, dw, q.mask_x, q.mask_w)

        return y, gradients

    return _with_gradient(x, kernel, step)


def dense(x, kernel, mode: IntegerMode, activation_range, scheme=None, table=None, table_gradients=False,
          input_finite=None):
    """x [..., K] times kernel [K, N] under the integer mode. The forward is the 1 x 1 conv of a 1 x 1 image per
    row; the straight-through gradients are acc32's matmuls, dx = dy w'^T and dw = x'^T dy: the same products and
    sums as the conv's gradient kernels (the spec's), about 5x faster on a 1 x 1 image (784 -> 300 at batch 128: 2.8
    against 15 ms on 2 AVX2 cores). table_gradients: the 1 x 1 conv's gradients through the table. input_finite as
    conv2d's."""
    codes, table, activation_range, signed = _layer_setup(mode, scheme, table, activation_range)
    n_in, n_out = K.shape(kernel)[-2], K.shape(kernel)[-1]
    rows = K.reshape(x, (-1, n_in))

    def step(rows, kernel):
        forward = lambda xb, wb, z_a, z_w, rescale: K.reshape(keras_ops.int_conv2d_codes(
            K.reshape(xb, (-1, 1, 1, n_in)), K.reshape(wb, (1, 1, n_in, n_out)), table, z_a, z_w, rescale, signed,
            1, "VALID", 1), (-1, n_out))
        y, q = _quantised_step(rows, kernel, codes, activation_range, forward, input_finite)

        def gradients(upstream):
            if table_gradients:
                image = lambda t: K.reshape(t, (-1, 1, 1, K.shape(t)[-1]))
                as_conv = _Quantised(image(q.b_x), q.s_a, q.z_a, K.reshape(q.b_w, (1, 1, n_in, n_out)), q.s_w,
                                     q.z_w, q.mask_x, q.mask_w, q.signed)
                dx, dw = conv2d_table_gradients(image(rows), K.reshape(kernel, (1, 1, n_in, n_out)),
                                                image(upstream), as_conv, codes, table, 1, "VALID", 1)
                return _masked(K.reshape(dx, (-1, n_in)), K.reshape(dw, (n_in, n_out)), q.mask_x, q.mask_w)
            x_hat, w_hat = q.dequantised()
            dx = keras_ops.matmul(upstream, K.transpose(w_hat), _GRADIENT_MODE, exact_gradients=False)
            dw = keras_ops.matmul(K.transpose(x_hat), upstream, _GRADIENT_MODE, exact_gradients=False)
            return _masked(dx, dw, q.mask_x, q.mask_w)

        return y, gradients

    y = _with_gradient(rows, kernel, step)
    return K.reshape(y, (*K.shape(x)[:-1], n_out))


# ------------------------------------------------------------------------------------- backward through the table


def _gradient_codes(t, codes: CodeSpace, t_range=None):
    """A gradient tensor's float32 codes per tensor by its own range (t_range where the caller has it), its scale and
    its zero point (_zero_point)."""
    s, z = scales(*(tensor_range(t) if t_range is None else t_range), codes)
    return _values(quantise(t, s, z, codes)[0], codes.kind == "signed"), s, _zero_point(z, codes)


def _zero_point(z, codes: CodeSpace):
    """A per-tensor zero point as the table gradients use it: the scheme's constant as a Python number where it has
    one (symmetric: 0 or 128, every operand's), else the tensor z (asymmetric: the range's)."""
    if codes.scheme == "symmetric":
        return 0.0 if codes.kind == "signed" else 128.0
    return z


def _as_operand(value, like):
    """A zero point for ops with `like`: a Python number through scalar(), a tensor as it is."""
    return scalar(value, like) if isinstance(value, (int, float)) else value


def _upsampled(q, stride: int, axis: int, fill):
    """q with stride - 1 codes `fill` between its elements along `axis` (1 or 2 of NHWC): [.., (n - 1) s + 1, ..]."""
    if stride == 1:
        return q
    n = q.shape[axis]
    filler = K.repeat(K.add(K.zeros_like(K.expand_dims(q, axis + 1)), _as_operand(fill, q)), stride - 1,
                      axis=axis + 1)
    joined = K.concatenate([K.expand_dims(q, axis + 1), filler], axis=axis + 1)
    shape = [-1, *q.shape[1:]]
    shape[axis] = n * stride
    joined = K.reshape(joined, shape)
    return joined[:, :(n - 1) * stride + 1] if axis == 1 else joined[:, :, :(n - 1) * stride + 1]


def _padded(q, before: tuple[int, int], after: tuple[int, int], fill):
    """q [N, H, W, C] with `before`/`after` rows and columns of codes `fill` on each side (a negative count crops).
    A tensor fill (an asymmetric zero point) pads q - fill with zeros and adds it back, exact on codes: torch pads
    with numbers only, and reading a number off a device tensor would stop a captured CUDA graph."""
    q = q[:, max(0, -before[0]):q.shape[1] - max(0, -after[0]), max(0, -before[1]):q.shape[2] - max(0, -after[1])]
    widths = [[0, 0], [max(0, before[0]), max(0, after[0])], [max(0, before[1]), max(0, after[1])], [0, 0]]
    if not any(max(w) for w in widths):
        return q
    if isinstance(fill, (int, float)):
        return K.pad(q, widths, constant_values=fill)
    return K.add(K.pad(K.subtract(q, fill), widths), fill)


def _zero_points(like, z):
    """int32 of like's shape, every element the zero point z (a Python number or a 0-d tensor)."""
    return K.cast(K.add(K.zeros_like(like), _as_operand(z, like)), "int32")


def _on_gpu(t) -> bool:
    """Whether the tensor t lies on a GPU (either backend)."""
    device = getattr(t, "device", None)
    return getattr(device, "type", None) == "cuda" or "GPU" in str(device or "").upper()


def _split_tables(table, z_a, z_w, signed: bool):
    """The table centred on the zero points (z_a of the first operand, z_w of the second), T'[a, w] = T[a, w] - z_w a
    - z_a w + z_a z_w (both 0: T itself; codes a, w by their values), cut into bytes: (lo, hi) int32 [65536] with
    T' = 256 hi + lo, 0 <= lo < 256, |hi| <= 510 (|T'| <= 65535 + 2 x 255^2). Made of Keras ops on the table's device
    (no host constant: a captured CUDA graph cannot copy one)."""
    centred = K.cast(table, "float32")  # |T'| < 2^18: exact in fp32, and so are the byte cuts below
    if not (isinstance(z_a, (int, float)) and isinstance(z_w, (int, float)) and z_a == z_w == 0):
        index = K.cast(K.arange(256 * 256, dtype="int32"), "float32")
        a = K.floor(K.divide(index, scalar(256.0, centred)))
        w = K.subtract(index, K.multiply(a, scalar(256.0, centred)))  # the bytes
        if signed:  # a signed code's value: its byte read as two's complement
            a, w = (K.where(K.greater_equal(v, scalar(128.0, v)), K.subtract(v, scalar(256.0, v)), v) for v in (a, w))
        z_a, z_w = _as_operand(z_a, centred), _as_operand(z_w, centred)
        centred = K.add(K.subtract(K.subtract(centred, K.multiply(a, z_w)), K.multiply(w, z_a)), K.multiply(z_a, z_w))
    hi = K.floor(K.divide(centred, scalar(256.0, centred)))
    lo = K.subtract(centred, K.multiply(hi, scalar(256.0, centred)))
    return K.cast(lo, "int32"), K.cast(hi, "int32")


def _conv_of_codes(x_codes, w_codes, table, z_a, z_w, rescale, signed: bool, strides, dilations, correction=None):
    """fl32(fl32(acc - correction) x rescale[c]) of the VALID conv of float32 codes (x NHWC, w HWIO) with the
    zero-point terms of z_a (x's) and z_w (w's, the same for every output channel): the forward's op on codes where
    its int32 sums hold the taps (K <= _MAX_TAPS; _GPU_SLICE_TAPS on a GPU) and nothing is to be taken off, else the
    same exact acc from slices of the input channels of at most that many taps, each run twice through the centred
    table's bytes (_split_tables: every partial sum below 2^24, so exact in the op's fp32 output) and added in float64
    (exact below 2^53), less `correction` (float64 [N, Ho, Wo, 1], exact integers), then rounded and rescaled once as
    the op does."""
    kh, kw, channels, out_c = w_codes.shape
    x_bytes, w_bytes = _as_bytes(x_codes), _as_bytes(w_codes)
    slice_taps = _GPU_SLICE_TAPS if _on_gpu(x_codes) else _MAX_TAPS  # the same bits either way: exact sums
    if correction is None and kh * kw * channels <= slice_taps:
        return keras_ops.int_conv2d_codes(x_bytes, w_bytes, table, _zero_points(rescale[:1], z_a),
                                          _zero_points(rescale, z_w), rescale, signed, strides, "VALID", dilations)
    step = slice_taps // (kh * kw)
    if step < 1:
        raise ValueError(f"a table gradient's conv with a {kh} x {kw} filter: more than {slice_taps} taps per channel")
    lo, hi = _split_tables(table, z_a, z_w, signed)
    ones, none = K.ones_like(rescale), _zero_points(rescale, 0.0)
    acc = None
    for c0 in range(0, channels, step):
        xs, ws = x_bytes[..., c0:c0 + step], w_bytes[:, :, c0:c0 + step]
        lo_sum, hi_sum = (K.cast(keras_ops.int_conv2d_codes(xs, ws, part, none[:1], none, ones, True, strides, "VALID",
                                                            dilations), "float64") for part in (lo, hi))
        part_acc = K.add(K.multiply(hi_sum, scalar(256.0, hi_sum)), lo_sum)
        acc = part_acc if acc is None else K.add(acc, part_acc)
    if correction is not None:
        acc = K.subtract(acc, correction)
    y = K.multiply(K.cast(acc, "float32"), rescale)
    return K.where(K.less(K.abs(y), scalar(SMALLEST_NORMAL, y)), K.zeros_like(y), y)


def _channel_zero_points_term(e, z_e, z_w, size: tuple[int, int], kernel: tuple[int, int], dilations):
    """The sum over the taps (kh, kw, co) of z_w[co] (e - z_e), float64 [N, H, W, 1] (exact integers): the zero-point
    term of dx that depends on the tap's channel co, when w's zero points differ from channel to channel. e is the
    padded, upsampled g codes [N, H + (kh - 1) dh, W + (kw - 1) dw, C_out] the conv reads; first the channels, then the
    kh x kw window (the filter is turned, but the term is the same at every (kh, kw))."""
    u = K.sum(K.multiply(K.cast(K.subtract(e, z_e), "float64"), K.cast(z_w, "float64")), axis=-1, keepdims=True)
    (h, w), (kh, kw), (dh, dw_) = size, kernel, dilations
    term = None
    for i in range(kh):
        for j in range(kw):
            window = u[:, i * dh:i * dh + h, j * dw_:j * dw_ + w]
            term = window if term is None else K.add(term, window)
    return term


def conv2d_table_gradients(x, kernel, dy, q: _Quantised, codes: CodeSpace, table, strides, padding: str, dilations):
    """(dx, dw) through the table (the spec's "Gradients through the table", before the masks), as two runs of the
    forward's op on codes: dw is the conv of x's codes (the forward's padding z_a made explicit, transposed to
    [C_in, H, W, N]) by dy's codes ([Ho, Wo, N, C_out]) with the strides and dilations swapped; dx the conv of g's codes
    upsampled by the strides and padded with z_g (a transposed conv) by w's codes turned around ([kh, kw, C_out, C_in],
    flipped), the zero-point term of w's per-channel zero points (an asymmetric scheme) taken off its exact sum; a sum
    longer than one run holds goes in slices (_conv_of_codes). Each sum is exact, so this is the reference's every
    bit."""
    (sh, sw), (dh, dw_) = axis_pair(strides, "strides"), axis_pair(dilations, "dilations")
    kh, kw, cin, cout = kernel.shape
    (h, w), (ho, wo) = x.shape[1:3], dy.shape[1:3]
    (_, top), (_, left) = (output_size(h, kh, sh, dh, padding), output_size(w, kw, sw, dw_, padding))
    signed = codes.kind == "signed"
    z_a = _zero_point(q.z_a, codes)
    nan = scalar(float("nan"), dy)
    dy_lo, dy_hi, dy_finite = finite_range(dy)  # one pass: dy's codes and both gradients' NaN rule

    # dw[kh, kw, ci, co] = sum over (n, ho, wo) of T[x code at the tap, dy code]
    d_codes, s_dy, z_dy = _gradient_codes(dy, codes, (dy_lo, dy_hi))
    bottom, right = ((ho - 1) * sh + (kh - 1) * dh + 1 - h - top, (wo - 1) * sw + (kw - 1) * dw_ + 1 - w - left)
    x_codes = K.transpose(_padded(q.q_x, (top, left), (max(0, bottom), max(0, right)), z_a), (3, 1, 2, 0))
    rescale = K.multiply(q.s_a, s_dy)  # fl32(s_a x s_dy), flushed as the forward's
    rescale = K.where(K.less(rescale, scalar(SMALLEST_NORMAL, rescale)), K.zeros_like(rescale), rescale)
    rescale = K.where(K.logical_and(all_finite(x), dy_finite), K.broadcast_to(K.reshape(rescale, (1,)), (cout,)),
                      nan)
    dw = _conv_of_codes(x_codes, K.transpose(d_codes, (1, 2, 0, 3)), table, z_a, z_dy, rescale, signed, (dh, dw_),
                        (sh, sw))
    dw = K.transpose(dw[:, :kh, :kw], (1, 2, 0, 3))

    # dx[n, hi, wi, ci] = sum over (kh, kw, co) of T[g code at (hi + top - kh dh) / sh, .., w code]
    g_codes, s_g, z_g = _gradient_codes(K.multiply(_flushed(dy), q.s_w), codes)
    up = _upsampled(_upsampled(g_codes, sh, 1, z_g), sw, 2, z_g)
    before = ((kh - 1) * dh - top, (kw - 1) * dw_ - left)
    after = (h + (kh - 1) * dh - before[0] - up.shape[1], w + (kw - 1) * dw_ - before[1] - up.shape[2])
    e = _padded(up, before, after, z_g)
    turned = K.flip(K.flip(K.transpose(q.q_w, (0, 1, 3, 2)), axis=0), axis=1)  # [kh, kw, C_out, C_in]
    rescale = K.where(K.logical_and(dy_finite, all_finite(kernel)), K.broadcast_to(K.reshape(s_g, (1,)), (cin,)),
                      nan)
    if codes.scheme == "symmetric":  # one zero point for every channel of w: the op's own terms
        return _conv_of_codes(e, turned, table, z_g, z_g, rescale, signed, 1, (dh, dw_)), dw
    # w's zero points differ by channel co, which dx sums over: the op's terms with z_w = 0, less sum z_w[co] (e - z_g)
    term = _channel_zero_points_term(e, z_g, q.z_w, (h, w), (kh, kw), (dh, dw_))
    return _conv_of_codes(e, turned, table, z_g, 0.0, rescale, signed, 1, (dh, dw_), correction=term), dw
