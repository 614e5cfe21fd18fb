"""Numpy reference of the integer modes (8-bit codes, products from a 256 x 256 table), bit-exact to the section
"Integer modes (8-bit, table products)" of docs/multipliers-spec.md.

A layer quantises its input (per tensor) and weights (per output channel) to 8-bit codes, takes every product of two
codes from the table, sums them as exact integers with the zero-point terms, and rescales the sum to fp32; its
backward is the straight-through estimator with `acc32` products. The pieces, in that order: `integer_mode` (the mode
names), `tensor_range` / `update_running_range` / `calibration_range` (ranges), `scales_from_range`, `quantise`,
`in_range`, `dequantise`, `table_sum` / `accumulate` (the integer sums), `rescale`, then `dense_forward`,
`conv2d_forward`, `dense_backward`, `conv2d_backward`.

Written for clarity, not speed. Every fp32 operation of the spec, fl32(a op b), is computed as the float64 operation
rounded to float32: exact for products of two fp32 values (24 + 24 bits < 53), and correctly rounded for sums and
quotients too (a float64 result rounded again to float32 is the once-rounded one: 53 >= 2 x 24 + 2), so no float
flag of the process (flush-to-zero, denormals-are-zero) can change a result. Integer sums are int64.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ops.modes import reference
from ops.modes.integer_names import KIND_AND_SCHEME
from ops.modes.integer_tables import SUFFIXES, exact_table, read_integer_table

SCHEMES = ("symmetric", "asymmetric")
DEFAULT_SCHEME = {"signed": "symmetric", "unsigned": "asymmetric"}
SMALLEST_NORMAL = 2.0 ** -126
MOMENTUM = np.float32(0.99)  # of the running activation range: 0x3F7D70A4; 1 - MOMENTUM is exact in fp32
# Elements of one [rows, K, cols] block of table look-ups in table_sum (int64: ~32 MB).
_SUM_BLOCK = 1 << 22


@dataclass(frozen=True)
class IntegerMode:
    """An integer mode: its name as written, the operands' kind ("signed"/"unsigned"), its scheme and its (256, 256)
    table."""

    name: str
    kind: str
    scheme: str
    table: np.ndarray  # int16 (signed) or uint16 (unsigned), indexed by the operand bytes: table[a & 255, w & 255]
    path: Path | None  # the table file, None for the exact int8 / uint8


def integer_mode(name: str) -> IntegerMode:
    """The mode for a name of integer_names ("int8", "uint8_sym", ...), alone (the exact multiplier of its kind) or
    with ":<file>" (a table of its kind); ValueError otherwise."""
    prefix, _, raw_path = name.partition(":")
    if prefix not in KIND_AND_SCHEME or (":" in name and not raw_path):
        raise ValueError(f"unknown integer mode {name!r}; valid: {', '.join(KIND_AND_SCHEME)} (the exact "
                         f"multipliers), each also as <name>:<file> with a table ({SUFFIXES['signed']} for int8*, "
                         f"{SUFFIXES['unsigned']} for uint8*)")
    kind, scheme = KIND_AND_SCHEME[prefix]
    if not raw_path:
        return IntegerMode(name, kind, scheme, exact_table(kind), None)
    path = Path(raw_path).expanduser().resolve()
    table, file_kind = read_integer_table(path)
    if file_kind != kind:
        raise ValueError(f"mode {name!r}: {path.name} is a {file_kind} table, {prefix}: takes a {kind} one "
                         f"(a name ending in {SUFFIXES[kind]})")
    return IntegerMode(name, kind, scheme, table, path)


@dataclass(frozen=True)
class CodeSpace:
    """The codes of one kind and scheme: the interval [qmin, qmax], the steps n of the scale, the symmetric z."""

    kind: str
    scheme: str

    def __post_init__(self):
        if self.kind not in DEFAULT_SCHEME or self.scheme not in SCHEMES:
            raise ValueError(f"codes of kind {self.kind!r}, scheme {self.scheme!r}: the kind is one of "
                             f"{', '.join(DEFAULT_SCHEME)}, the scheme one of {', '.join(SCHEMES)}")

    @property
    def qmin(self) -> int:
        return {("signed", "symmetric"): -127, ("signed", "asymmetric"): -128,
                ("unsigned", "symmetric"): 1, ("unsigned", "asymmetric"): 0}[self.kind, self.scheme]

    @property
    def qmax(self) -> int:
        return 127 if self.kind == "signed" else 255

    @property
    def steps(self) -> int:
        """n of s = range / n: 127 (symmetric), 255 (asymmetric)."""
        return 127 if self.scheme == "symmetric" else 255


def code_space(mode: IntegerMode, scheme: str | None = None) -> CodeSpace:
    """The codes of the mode's kind under `scheme` (default: the mode's own)."""
    return CodeSpace(mode.kind, scheme or mode.scheme)


# ---------------------------------------------------------------------------------------------- fp32 arithmetic


def fl32(values) -> np.ndarray:
    """float64 values rounded once to float32 (nearest, ties to even), a result below 2**-126 flushed to zero."""
    with np.errstate(over="ignore"):
        rounded = np.asarray(values, dtype=np.float64).astype(np.float32)
    return np.where(np.abs(rounded) < SMALLEST_NORMAL, np.float32(0), rounded).astype(np.float32)


def _as_fp32_input(x) -> np.ndarray:
    """An fp32 input with its subnormals counted as zero (the spec lets kernels run with denormals-are-zero)."""
    x = np.asarray(x, dtype=np.float32)
    return np.where(np.abs(x) < SMALLEST_NORMAL, np.float32(0), x).astype(np.float32)


# -------------------------------------------------------------------------------------------------------- ranges


def tensor_range(x, per_channel: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) float32: min(0, smallest finite element), max(0, largest finite element); per_channel: over every
    axis but the last (weights: Dense [K, N], Conv2D HWIO), one pair per output channel."""
    x = _as_fp32_input(x)
    x = np.where(np.isfinite(x), x, np.float32(0))  # left out: 0 is inside every range anyway
    x = x.reshape(-1, x.shape[-1]) if per_channel else x.reshape(-1, 1)
    zeros = np.zeros((1, x.shape[1]), np.float32)
    lo = np.concatenate([zeros, x]).min(axis=0)
    hi = np.concatenate([zeros, x]).max(axis=0)
    return (lo, hi) if per_channel else (lo[0], hi[0])


def update_running_range(running, batch, momentum=MOMENTUM) -> tuple[np.ndarray, np.ndarray]:
    """One training step's update of an activation range: `batch` itself if `running` is None, else each bound
    fl32(fl32(mu x running) + fl32((1 - mu) x batch)) (two products, one sum, each rounded; no fused multiply-add)."""
    if running is None:
        return tuple(np.float32(v) for v in batch)
    mu = np.float64(np.float32(momentum))
    nu = np.float64(np.float32(1) - np.float32(momentum))  # exact for mu in [0.5, 1]
    return tuple(fl32(np.float64(fl32(mu * np.float64(r))) + np.float64(fl32(nu * np.float64(b))))[()]
                 for r, b in zip(running, batch))


def calibration_range(ranges) -> tuple[np.float32, np.float32]:
    """The range after calibration batches with these ranges: the smallest lo, the largest hi (exact)."""
    los, his = zip(*ranges)
    return np.float32(min(los)), np.float32(max(his))


# ------------------------------------------------------------------------------------------ scale and quantiser


def scales_from_range(lo, hi, codes: CodeSpace) -> tuple[np.ndarray, np.ndarray]:
    """(s float32, z int64) of each range: s = fl32(max(-lo, hi) / 127) (symmetric) or fl32(fl32(hi - lo) / 255)
    (asymmetric), 1 where that is below 2**-126 (a zero range); z = 0 / 128 (symmetric), else
    qmin + rint(fl32(-lo / s)) clamped to [qmin, qmax]."""
    lo, hi = np.asarray(lo, np.float32), np.asarray(hi, np.float32)
    if codes.scheme == "symmetric":
        width = np.maximum(-lo, hi).astype(np.float64)
    else:
        width = fl32(hi.astype(np.float64) - lo.astype(np.float64)).astype(np.float64)
    scale = fl32(width / codes.steps)
    scale = np.where(scale < SMALLEST_NORMAL, np.float32(1), scale).astype(np.float32)
    if codes.scheme == "symmetric":
        zero = np.full(scale.shape, 0 if codes.kind == "signed" else 128, np.int64)
    else:
        offset = np.rint(fl32(-lo.astype(np.float64) / scale.astype(np.float64))).astype(np.float64)
        zero = np.clip(codes.qmin + offset, codes.qmin, codes.qmax).astype(np.int64)
    return scale, zero


def _rounded_quotient(x, scale) -> np.ndarray:
    """rint(fl32(x / s)) as float64 (the fp32 quotient rounded to an integer, ties to even); +-inf on overflow."""
    x = _as_fp32_input(x).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        quotient = fl32(x / np.asarray(scale, np.float32).astype(np.float64))
    return np.rint(quotient).astype(np.float64)


def quantise(x, scale, zero_point, codes: CodeSpace) -> np.ndarray:
    """int64 codes q = clamp(rint(fl32(x / s)) + z, qmin, qmax); z for a NaN or infinite x. Per-channel scale and
    zero point broadcast against the last axis."""
    x = np.asarray(x, np.float32)
    rounded = _rounded_quotient(x, scale)
    q = np.clip(np.where(np.isfinite(x), rounded, 0) + np.asarray(zero_point), codes.qmin, codes.qmax)
    return np.broadcast_to(q, x.shape).astype(np.int64)


def in_range(x, scale, zero_point, codes: CodeSpace) -> np.ndarray:
    """The straight-through mask: True where the clamp of `quantise` did not act (False for a non-finite x)."""
    x = np.asarray(x, np.float32)
    unclamped = _rounded_quotient(x, scale) + np.asarray(zero_point)
    return np.isfinite(x) & (unclamped >= codes.qmin) & (unclamped <= codes.qmax)


def dequantise(codes, scale, zero_point) -> np.ndarray:
    """x' = fl32((q - z) x s), float32."""
    return fl32((np.asarray(codes) - np.asarray(zero_point)).astype(np.float64)
                * np.asarray(scale, np.float32).astype(np.float64))


# ------------------------------------------------------------------------------------------------- integer sums


def table_sum(codes_a, codes_w, table) -> np.ndarray:
    """[M, K] x [K, N] codes: sum over k of table[a[i, k] & 255, w[k, j] & 255], exact, int64 [M, N]."""
    a = np.asarray(codes_a, np.int64) & 255
    w = np.asarray(codes_w, np.int64) & 255
    if a.ndim != 2 or w.ndim != 2 or a.shape[1] != w.shape[0]:
        raise ValueError(f"table_sum needs [M, K] x [K, N] codes; got {a.shape} x {w.shape}")
    table = np.asarray(table).astype(np.int64)
    out = np.zeros((a.shape[0], w.shape[1]), np.int64)
    rows = max(1, _SUM_BLOCK // max(1, a.shape[1] * w.shape[1]))
    for r0 in range(0, a.shape[0], rows):
        out[r0:r0 + rows] = table[a[r0:r0 + rows, :, None], w[None, :, :]].sum(axis=1)
    return out


def accumulate(codes_a, zero_a, codes_w, zero_w, table) -> np.ndarray:
    """acc = sum T[a, w] - z_w sum a - z_a sum w + K z_a z_w (the table on the stored codes, the zero-point terms
    exact): int64 [M, N]; zero_a a scalar, zero_w one per output channel."""
    a, w = np.asarray(codes_a, np.int64), np.asarray(codes_w, np.int64)
    zero_a, zero_w = np.int64(zero_a), np.asarray(zero_w, np.int64)
    inner = a.shape[1]
    return (table_sum(a, w, table) - zero_w[None, :] * a.sum(axis=1)[:, None]
            - zero_a * w.sum(axis=0)[None, :] + inner * zero_a * zero_w[None, :])


def rescale(acc, scale_a, scale_w, bias=None) -> np.ndarray:
    """float32 y = fl32(fl32(acc) x fl32(s_a x s_w[c])), then fl32(y + b[c]) with a bias."""
    combined = fl32(np.float64(np.float32(scale_a)) * np.asarray(scale_w, np.float32).astype(np.float64))
    summed = fl32(np.asarray(acc, np.int64).astype(np.float64))  # exact in float64 below 2**53
    y = fl32(summed.astype(np.float64) * combined.astype(np.float64))
    if bias is not None:
        y = fl32(y.astype(np.float64) + _as_fp32_input(bias).astype(np.float64))
    return y


# -------------------------------------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class Quantised:
    """A layer's operands as codes: activations per tensor (scale_a, zero_a), weights per output channel."""

    codes_a: np.ndarray
    scale_a: np.float32
    zero_a: np.int64
    codes_w: np.ndarray
    scale_w: np.ndarray
    zero_w: np.ndarray


def quantise_operands(x, w, codes: CodeSpace, activation_range=None) -> Quantised:
    """x per tensor with `activation_range` (lo, hi) (the running range; default the batch's own) and w per output
    channel with its current range."""
    lo, hi = activation_range if activation_range is not None else tensor_range(x)
    scale_a, zero_a = scales_from_range(lo, hi, codes)
    scale_w, zero_w = scales_from_range(*tensor_range(w, per_channel=True), codes)
    return Quantised(quantise(x, scale_a, zero_a, codes), scale_a[()], zero_a[()],
                     quantise(w, scale_w, zero_w, codes), scale_w, zero_w)


def _with_non_finite_as_nan(y: np.ndarray, x, w) -> np.ndarray:
    """Every output NaN if x holds a NaN or inf; every output of channel c NaN if w's channel c does."""
    w = np.asarray(w, np.float32)
    bad_channel = ~np.isfinite(w.reshape(-1, w.shape[-1])).all(axis=0)
    bad = bad_channel | (not np.isfinite(np.asarray(x, np.float32)).all())
    return np.where(bad, np.float32(np.nan), y).astype(np.float32)


def dense_forward(x, w, mode: IntegerMode, scheme: str | None = None, bias=None,
                  activation_range=None) -> np.ndarray:
    """[M, K] x [K, N] through the mode's table: float32 [M, N]."""
    q = quantise_operands(x, w, code_space(mode, scheme), activation_range)
    acc = accumulate(q.codes_a, q.zero_a, q.codes_w, q.zero_w, mode.table)
    return _with_non_finite_as_nan(rescale(acc, q.scale_a, q.scale_w, bias), x, w)


def axis_pair(value, what: str) -> tuple[int, int]:
    """(h, w) of a stride or dilation given as an int or a pair; ValueError naming `what` otherwise."""
    pair = (int(value), int(value)) if np.isscalar(value) else tuple(int(v) for v in value)
    if len(pair) != 2 or min(pair) < 1:
        raise ValueError(f"{what} must be an int or a pair (h, w) of ints >= 1; got {value!r}")
    return pair


def im2col(codes, kernel_hw, strides=1, padding="SAME", dilations=1, fill=0) -> np.ndarray:
    """NHWC codes -> [N, Ho, Wo, kh * kw * C] patches (TF's SAME / VALID geometry, reference.output_size), the
    padding taps holding `fill` (the activations' zero point)."""
    codes = np.asarray(codes)
    indices, inside = [], []
    for size, kernel, stride, dilation in zip(codes.shape[1:3], kernel_hw, axis_pair(strides, "strides"),
                                              axis_pair(dilations, "dilations")):
        out, before = reference.output_size(size, kernel, stride, dilation, padding)
        index = np.arange(out)[:, None] * stride - before + np.arange(kernel)[None, :] * dilation  # [out, kernel]
        indices.append(np.clip(index, 0, size - 1))
        inside.append((index >= 0) & (index < size))
    (rows, cols), (rows_ok, cols_ok) = indices, inside
    patches = codes[:, rows[:, None, :, None], cols[None, :, None, :], :]  # [N, Ho, Wo, kh, kw, C]
    valid = (rows_ok[:, None, :, None] & cols_ok[None, :, None, :])[None, ..., None]
    patches = np.where(valid, patches, fill)
    return patches.reshape(*patches.shape[:3], -1)


def conv2d_forward(x, w, mode: IntegerMode, scheme: str | None = None, strides=1, padding="SAME", dilations=1,
                   bias=None, activation_range=None) -> np.ndarray:
    """NHWC x, HWIO w through the mode's table: float32 [N, Ho, Wo, O]; padding taps are the code z_a, multiplied
    like any other (so this is dense_forward's sum on the im2col patches of the codes)."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    q = quantise_operands(x, w, code_space(mode, scheme), activation_range)
    patches = im2col(q.codes_a, w.shape[:2], strides, padding, dilations, fill=q.zero_a)
    acc = accumulate(patches.reshape(-1, patches.shape[-1]), q.zero_a, q.codes_w.reshape(-1, w.shape[3]),
                     q.zero_w, mode.table)
    y = rescale(acc, q.scale_a, q.scale_w, bias).reshape(*patches.shape[:3], w.shape[3])
    return _with_non_finite_as_nan(y, x, w)


# ---------------------------------------------------------------------------------------------------- backward


def _straight_through(x, w, mode: IntegerMode, scheme, activation_range):
    """(x', w', mask_x, mask_w) of the layer's forward."""
    codes = code_space(mode, scheme)
    q = quantise_operands(x, w, codes, activation_range)
    return (dequantise(q.codes_a, q.scale_a, q.zero_a), dequantise(q.codes_w, q.scale_w, q.zero_w),
            in_range(x, q.scale_a, q.zero_a, codes), in_range(w, q.scale_w, q.zero_w, codes))


def dense_backward(x, w, dy, mode: IntegerMode, scheme: str | None = None,
                   activation_range=None) -> tuple[np.ndarray, np.ndarray]:
    """The default (straight-through) gradients (dx, dw) of dense_forward, float64 sums of `acc32` products:
    dx = (dy w'^T) masked by x's in_range, dw = (x'^T dy) masked by w's."""
    x_hat, w_hat, mask_x, mask_w = _straight_through(x, w, mode, scheme, activation_range)
    dx = reference.matmul(dy, np.ascontiguousarray(w_hat.T), "acc32")
    dw = reference.matmul(np.ascontiguousarray(x_hat.T), dy, "acc32")
    return np.where(mask_x, dx, 0.0), np.where(mask_w, dw, 0.0)


def conv2d_backward(x, w, dy, mode: IntegerMode, scheme: str | None = None, strides=1, padding="SAME", dilations=1,
                    activation_range=None) -> tuple[np.ndarray, np.ndarray]:
    """The default gradients (dx, dw) of conv2d_forward: acc32's conv2d gradients of w' and x', masked."""
    x_hat, w_hat, mask_x, mask_w = _straight_through(x, w, mode, scheme, activation_range)
    x = np.asarray(x)
    dx = reference.conv2d_backprop_input(x.shape, w_hat, dy, strides, padding, dilations, "acc32")
    dw = reference.conv2d_backprop_filter(x_hat, w_hat.shape, dy, strides, padding, dilations, "acc32")
    return np.where(mask_x, dx, 0.0), np.where(mask_w, dw, 0.0)


# ------------------------------------------------------------------------------------- backward through the table


def _gradient_codes(t, codes: CodeSpace) -> tuple[np.ndarray, np.float32, np.int64]:
    """A gradient tensor's codes per tensor with its own range: (codes, s, z)."""
    scale, zero = scales_from_range(*tensor_range(t), codes)
    return quantise(t, scale, zero, codes), scale[()], zero[()]


def conv2d_table_backward(x, w, dy, mode: IntegerMode, scheme: str | None = None, strides=1, padding="SAME",
                          dilations=1, activation_range=None) -> tuple[np.ndarray, np.ndarray]:
    """The gradients through the table (dx, dw) of conv2d_forward, the spec's "Gradients through the table":

    dw[kh, kw, ci, co] = rescale(sum over the forward's taps (n, ho, wo) of T[x code, dy code] with the zero-point
    terms, s_a x s_dy), dy's codes per tensor by its own range; dx = rescale(the transposed convolution of g's codes,
    g = fl32(dy x s_w[co]) per tensor by its own range, with w's codes, s_g x 1): every tap (kh, kw, co) of every input
    pixel is a product T[g code, w code] with the zero-point terms of its own channel co, the taps that fall between
    dy's strides or outside dy being g's zero point; both masked as the straight-through gradients."""
    codes = code_space(mode, scheme)
    x, w, dy = (np.asarray(v, np.float32) for v in (x, w, dy))
    q = quantise_operands(x, w, codes, activation_range)
    (sh, sw), (dh, dw_) = axis_pair(strides, "strides"), axis_pair(dilations, "dilations")
    kh, kw, cin, cout = w.shape
    # dw: the forward's im2col patches of x's codes (padding z_a) against dy's codes, k = the output pixels
    d_codes, s_dy, z_dy = _gradient_codes(dy, codes)
    patches = im2col(q.codes_a, (kh, kw), strides, padding, dilations, fill=q.zero_a).reshape(-1, kh * kw * cin)
    acc = accumulate(np.ascontiguousarray(patches.T), q.zero_a, d_codes.reshape(-1, cout),
                     np.full(cout, z_dy), mode.table)
    dw = rescale(acc, q.scale_a, np.full(cout, s_dy, np.float32)).reshape(w.shape)
    # dx: input pixel (hi, wi) takes tap (kh, kw) from dy's row (hi + pad_top - kh d) / s where that divides
    g = fl32(_as_fp32_input(dy).astype(np.float64) * q.scale_w.astype(np.float64))
    g_codes, s_g, z_g = _gradient_codes(g, codes)
    rows, cols = [], []
    for size, out, kernel, stride, dilation in ((x.shape[1], dy.shape[1], kh, sh, dh),
                                                 (x.shape[2], dy.shape[2], kw, sw, dw_)):
        _, before = reference.output_size(size, kernel, stride, dilation, padding)
        source = np.arange(size)[:, None] + before - np.arange(kernel)[None, :] * dilation  # [size, kernel]
        exists = (source % stride == 0) & (source >= 0) & (source // stride < out)
        rows.append(np.where(exists, source // stride, -1))
    (rows, cols) = rows
    gathered = g_codes[:, np.clip(rows, 0, None)[:, None, :, None], np.clip(cols, 0, None)[None, :, None, :], :]
    exists = ((rows >= 0)[:, None, :, None] & (cols >= 0)[None, :, None, :])[None, ..., None]
    taps = np.where(exists, gathered, z_g).reshape(-1, kh * kw * cout)  # [N H W, (kh, kw, co)]
    w_taps = np.ascontiguousarray(q.codes_w.transpose(0, 1, 3, 2)).reshape(-1, cin)  # [(kh, kw, co), ci]
    z_w = np.broadcast_to(np.asarray(q.zero_w, np.int64), (kh, kw, cout)).reshape(-1)  # each tap's channel's
    # sum over the taps of T[e, w] - z_w[co] e - z_g w + z_g z_w[co]: accumulate's terms, z_w by the tap's channel
    acc = (table_sum(taps, w_taps, mode.table) - (taps @ z_w)[:, None] - z_g * w_taps.sum(axis=0)[None, :]
           + z_g * z_w.sum())
    dx = rescale(acc, s_g, np.ones(cin, np.float32)).reshape(x.shape)
    finite = lambda *ts: all(np.isfinite(t).all() for t in ts)
    dx = np.where(finite(dy, w), dx, np.float32(np.nan))
    dw = np.where(finite(x, dy), dw, np.float32(np.nan))
    return (np.where(in_range(x, q.scale_a, q.zero_a, codes), dx, np.float32(0)).astype(np.float32),
            np.where(in_range(w, q.scale_w, q.zero_w, codes), dw, np.float32(0)).astype(np.float32))


def dense_table_backward(x, w, dy, mode: IntegerMode, scheme: str | None = None,
                         activation_range=None) -> tuple[np.ndarray, np.ndarray]:
    """The gradients through the table (dx, dw) of dense_forward: conv2d_table_backward's of one 1 x 1 image a row."""
    x, w, dy = (np.asarray(v, np.float32) for v in (x, w, dy))
    dx, dw = conv2d_table_backward(x[:, None, None, :], w[None, None], dy[:, None, None, :], mode, scheme,
                                   padding="VALID", activation_range=activation_range)
    return dx.reshape(x.shape), dw.reshape(w.shape)
