"""Numpy references of every multiplier mode, bit-exact to docs/multipliers-spec.md, and of the layers built on them.

`product` is the definition the compiled kernels are tested against, bit for bit; it works on the uint32 bit
patterns of the operands so that numpy's float behaviour (and any flush-to-zero setting of the process) cannot
change a result. `matmul` and the conv2d functions are float64 sums of those products: slow, for tests on small
shapes. NaN results are specified as NaN only (the payload is the platform's), signed zeros may differ (rule 4).
"""

from __future__ import annotations

import numpy as np

from ops.modes.multipliers import Multiplier, parse

SIGN_BIT = np.uint32(0x80000000)
EXPONENT_MASK = np.uint32(0xFF)
FIELD_MASK = np.uint32(0x7FFFFF)  # the 23-bit mantissa field
INF_BITS = np.uint32(0x7F800000)
FIELD_BITS = 23
EXPONENT_BIAS = 127
# MBM correction K = 2**-4 + 2**-6 in units of 2**-23 (docs/multipliers-spec.md); halved when the mantissa sum carries.
MBM_CORRECTION = 655360
MANTISSA_FAMILIES = ("mbm", "mitchell", "bf16")
# Elements of one [rows, K, cols] block of products in matmul: ~10 uint64 temporaries of this size (~80 MB) in
# `product` bound the memory of a reference matmul of any shape.
_MATMUL_BLOCK = 1 << 20


def mantissa_product(fa, fb, family: str, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The carry c (0/1) and m-bit mantissa M of 1.fa x 1.fb for fields fa, fb of m bits (arrays, broadcast).

    family: "mbm" (am32/am16), "mitchell" (mit32/mit16) or "bf16" (acc16; for m != 7 the same definition with m
    bits: the exact product of m-bit-mantissa operands, truncated to m bits). Returns uint32 arrays (c, M).
    """
    if family not in MANTISSA_FAMILIES:
        raise ValueError(f"mantissa_product has no family {family!r}; valid: {', '.join(MANTISSA_FAMILIES)}")
    if not (isinstance(m, (int, np.integer)) and 1 <= m <= FIELD_BITS):
        raise ValueError(f"m = {m!r} mantissa bits: must be an integer in 1..{FIELD_BITS}")
    m = int(m)
    one = np.int64(1) << m
    fa = np.asarray(fa).astype(np.int64)
    fb = np.asarray(fb).astype(np.int64)
    if np.any((fa < 0) | (fa >= one) | (fb < 0) | (fb >= one)):
        raise ValueError(f"mantissa fields must be in 0..{int(one) - 1} for m = {m}")

    if family == "mitchell":
        total = fa + fb
        carry = total >= one
        mantissa = np.where(carry, total - one, total)
    elif family == "mbm":
        if m < FIELD_BITS:  # force the lowest bit: removes the bias of truncating the operands to m bits
            fa, fb = fa | 1, fb | 1
        total = fa + fb
        carry = total >= one
        correction = np.where(carry, MBM_CORRECTION >> 1, MBM_CORRECTION) >> (FIELD_BITS - m)
        below = total + correction  # c = 0: the product is 1 + xa + xb + K
        above = total - one + correction  # c = 1: twice (xa + xb + K/2) above the carry
        # c = 0 but the correction pushed the product to 2: carry and halve (truncating).
        reached_two = ~carry & (below >= one)
        # c = 1 and the corrected mantissa overflows (the corner near xa = xb = 1): the correction is dropped.
        corner = carry & (above >= one)
        mantissa = np.where(carry, np.where(corner, total - one, above),
                            np.where(reached_two, (below - one) >> 1, below))
        carry = carry | reached_two
    else:  # bf16: P = (ONE + fa)(ONE + fb) in units of 2**-2m, truncated to m bits
        full = (one + fa) * (one + fb)
        carry = full >= (np.int64(1) << (2 * m + 1))
        mantissa = np.where(carry, (full - (np.int64(1) << (2 * m + 1))) >> (m + 1),
                            (full - (np.int64(1) << (2 * m))) >> m)
    return carry.astype(np.uint32), mantissa.astype(np.uint32)


def product(a, b, multiplier: str | Multiplier) -> np.ndarray:
    """Elementwise a (*) b through `multiplier` (a name, "lut:<path>" or a Multiplier), with numpy broadcasting.

    Operands are taken as float32; the result is float32. For table modes `a` gives the table's first index (Fa).
    """
    mode = parse(multiplier)
    if mode.is_native:
        raise ValueError(
            "'native' is not a product mode: it means the framework's own layers, with no custom op; "
            "for exact fp32 products use 'acc32'"
        )
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
    if mode.family == "ieee16":
        return _fp16_product(a, b)

    bits_a = np.ascontiguousarray(a).view(np.uint32)
    bits_b = np.ascontiguousarray(b).view(np.uint32)
    exp_a = ((bits_a >> FIELD_BITS) & EXPONENT_MASK).astype(np.int64)
    exp_b = ((bits_b >> FIELD_BITS) & EXPONENT_MASK).astype(np.int64)
    field_a = bits_a & FIELD_MASK
    field_b = bits_b & FIELD_MASK
    sign = (bits_a ^ bits_b) & SIGN_BIT

    if mode.family == "ieee32":
        magnitude = _fp32_rne_ftz_magnitude(exp_a, exp_b, field_a, field_b)
    else:
        m = mode.mantissa_bits
        fa, fb = field_a >> np.uint32(FIELD_BITS - m), field_b >> np.uint32(FIELD_BITS - m)
        if mode.family == "table":
            entry = mode.table[fa, fb]
            carry, mantissa = (entry >> 7).astype(np.uint32), (entry & 0x7F).astype(np.uint32)
        else:
            carry, mantissa = mantissa_product(fa, fb, mode.family, m)
        exponent = exp_a + exp_b - EXPONENT_BIAS + carry  # rule 3: biased exponent of the result
        magnitude = (np.clip(exponent, 0, 255).astype(np.uint32) << np.uint32(FIELD_BITS)) | (
            mantissa << np.uint32(FIELD_BITS - m)
        )
        magnitude = np.where(exponent <= 0, np.uint32(0), magnitude)  # no subnormal results: a zero
        magnitude = np.where(exponent >= 255, INF_BITS, magnitude)  # an infinity, mantissa dropped

    bits = sign | magnitude.astype(np.uint32)
    bits = np.where((exp_a == 0) | (exp_b == 0), sign, bits)  # rule 2: a zero or subnormal operand gives a zero
    special = (exp_a == 255) | (exp_b == 255)
    if np.any(special):  # rule 1, applied last so that it wins over rule 2
        bits = np.where(special, _ieee_special_product(a, b, exp_a, field_a, exp_b, field_b), bits)
    return bits.astype(np.uint32).view(np.float32).reshape(a.shape)  # 0-d in, 0-d out


def _fp32_rne_ftz_magnitude(exp_a, exp_b, field_a, field_b) -> np.ndarray:
    """|a*b| as fp32 bits: IEEE round to nearest even (with gradual underflow), then a subnormal result flushed.

    Integer arithmetic on the 24-bit significands, so no float flag of the process matters. Operands are taken as
    normal (zeros, subnormals, inf and NaN are replaced by the caller). Round first, then flush: an exact product in
    [2**-126 - 2**-150, 2**-126) rounds to 2**-126, a normal, and is kept (e.g. 2**-63 x (2 - 2**-23) * 2**-64), where
    hardware whose flush-to-zero tests tininess before rounding gives 0.
    """
    sig_a = (field_a.astype(np.uint64) | np.uint64(1 << FIELD_BITS))
    sig_b = (field_b.astype(np.uint64) | np.uint64(1 << FIELD_BITS))
    exact = sig_a * sig_b  # in [2**46, 2**48): exact in uint64
    high = (exact >> np.uint64(47)).astype(np.int64)  # the significand product reached 2
    exponent = exp_a + exp_b - EXPONENT_BIAS + high
    # Keep 24 significant bits for a normal result; below exponent 1 the subnormal grid drops (1 - exponent) more.
    # Beyond 60 every bit of the 48-bit product is dropped and the result rounds to zero, as at any larger shift.
    drop = np.minimum(FIELD_BITS + high + np.maximum(1 - exponent, 0), 60).astype(np.uint64)
    kept = exact >> drop
    rest = exact & ((np.uint64(1) << drop) - np.uint64(1))
    half = np.uint64(1) << (drop - np.uint64(1))
    kept = kept + ((rest > half) | ((rest == half) & ((kept & np.uint64(1)) == 1))).astype(np.uint64)
    # Normal: kept in [2**23, 2**24]; adding it to the exponent field lets a round-up to 2**24 carry into the
    # exponent. Subnormal grid: kept <= 2**23 is already the bit pattern (2**23 = the smallest normal).
    magnitude = np.where(exponent >= 1,
                         (np.maximum(exponent, 1).astype(np.uint64) << np.uint64(FIELD_BITS))
                         + kept - np.uint64(1 << FIELD_BITS),
                         kept)
    magnitude = np.where(magnitude >= np.uint64(INF_BITS), np.uint64(INF_BITS), magnitude)
    magnitude = np.where(magnitude < np.uint64(1 << FIELD_BITS), np.uint64(0), magnitude)  # flush to zero
    return magnitude.astype(np.uint32)


def _ieee_special_product(a, b, exp_a, field_a, exp_b, field_b) -> np.ndarray:
    """Bits of the IEEE fp32 product for operand pairs with an inf or NaN (rule 1).

    A subnormal operand is replaced by +-1.0 first: inf x subnormal is inf with the product's sign, which a process
    with denormals-are-zero would turn into NaN; every other result (inf, NaN) is then the same as IEEE's.
    """
    one = np.float32(1.0)
    a = np.where((exp_a == 0) & (field_a != 0), np.copysign(one, a), a)
    b = np.where((exp_b == 0) & (field_b != 0), np.copysign(one, b), b)
    with np.errstate(invalid="ignore", over="ignore"):
        return (a.astype(np.float32) * b.astype(np.float32)).view(np.uint32)


def _fp16_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp16 mode: operands rounded to binary16 (RNE, subnormals kept, overflow to inf), product rounded the same.

    The product of two binary16 values is exact in fp32 (11 x 11 = 22 significant bits; |p| >= 2**-48, a normal
    fp32), so only the two roundings to binary16 matter, and numpy's float16 casts are RNE.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        exact = a.astype(np.float16).astype(np.float32) * b.astype(np.float16).astype(np.float32)
        return exact.astype(np.float16).astype(np.float32)


# ---------------------------------------------------------------------------------------------- layer references


def matmul(a, b, multiplier: str | Multiplier) -> np.ndarray:
    """[M, K] x [K, N] with every product a[i, k] (*) b[k, j] through `product`, summed in float64: [M, N] float64."""
    return _matmul(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32), parse(multiplier))


def _matmul(a: np.ndarray, b: np.ndarray, mode: Multiplier, a_valid: np.ndarray | None = None) -> np.ndarray:
    """matmul; where a_valid[i, k] is False the products of a[i, k] are left out (padding taps of a convolution)."""
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs [M, K] x [K, N]; got {a.shape} x {b.shape}")
    rows, inner = a.shape
    cols = b.shape[1]
    out = np.zeros((rows, cols), dtype=np.float64)
    if rows == 0 or cols == 0 or inner == 0:
        return out
    col_step = max(1, min(cols, _MATMUL_BLOCK // inner))
    row_step = max(1, _MATMUL_BLOCK // (inner * col_step))
    for r0 in range(0, rows, row_step):
        r1 = min(rows, r0 + row_step)
        for c0 in range(0, cols, col_step):
            c1 = min(cols, c0 + col_step)
            products = product(a[r0:r1, :, None], b[None, :, c0:c1], mode)  # [rows, K, cols] float32
            if a_valid is not None:
                products = np.where(a_valid[r0:r1, :, None], products, np.float32(0))
            out[r0:r1, c0:c1] = products.sum(axis=1, dtype=np.float64)
    return out


def _pair(value, what: str) -> tuple[int, int]:
    """(h, w) from an int, a pair, or TF's 4-element NHWC form [1, h, w, 1]."""
    if isinstance(value, (int, np.integer)):
        pair = (int(value), int(value))
    else:
        value = tuple(int(v) for v in value)
        if len(value) == 2:
            pair = value
        elif len(value) == 4 and value[0] == 1 and value[3] == 1:
            pair = value[1:3]
        else:
            raise ValueError(f"{what} must be an int, a pair (h, w) or [1, h, w, 1]; got {value}")
    if min(pair) < 1:
        raise ValueError(f"{what} must be >= 1, got {pair}")
    return pair


def output_size(size: int, kernel: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """(output size, padding before) along one axis, TF's rule: SAME pads (pad_total // 2) before, the rest after."""
    span = (kernel - 1) * dilation + 1
    if padding == "SAME":
        out = -(-size // stride)
        pad_total = max((out - 1) * stride + span - size, 0)
        return out, pad_total // 2
    if padding == "VALID":
        if span > size:
            raise ValueError(f"VALID convolution: dilated kernel span {span} exceeds the input size {size}")
        return (size - span) // stride + 1, 0
    raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")


def _conv_geometry(input_shape, filter_shape, strides, padding, dilations):
    """Per axis (h, w): input index [out, k] of every tap and whether it lies inside the input (not padding)."""
    _, height, width, channels = input_shape
    k_h, k_w, filter_channels, _ = filter_shape
    if channels != filter_channels:
        raise ValueError(f"input has {channels} channels but the filter expects {filter_channels} (HWIO)")
    stride, dilation = _pair(strides, "strides"), _pair(dilations, "dilations")
    axes = []
    for size, kernel, s, d in zip((height, width), (k_h, k_w), stride, dilation):
        out, before = output_size(size, kernel, s, d, padding)
        index = np.arange(out)[:, None] * s - before + np.arange(kernel)[None, :] * d  # [out, kernel]
        axes.append((index, (index >= 0) & (index < size)))
    return axes


def conv2d(x, w, strides=1, padding="SAME", dilations=1, multiplier: str | Multiplier = "acc32") -> np.ndarray:
    """NHWC x (*) HWIO w as im2col + the reference matmul (x the left operand): [N, Ho, Wo, O] float64.

    Padding taps are not multiplied (they contribute exactly zero, even against an inf weight).
    """
    x, w, mode = np.asarray(x, np.float32), np.asarray(w, np.float32), parse(multiplier)
    (ih, h_ok), (iw, w_ok) = _conv_geometry(x.shape, w.shape, strides, padding, dilations)
    batch, channels = x.shape[0], x.shape[3]
    out_h, out_w = ih.shape[0], iw.shape[0]
    rows_h, rows_w = np.clip(ih, 0, x.shape[1] - 1), np.clip(iw, 0, x.shape[2] - 1)
    # [N, Ho, Wo, kh, kw, C]: the advanced indices broadcast to [Ho, Wo, kh, kw]
    patches = x[:, rows_h[:, None, :, None], rows_w[None, :, None, :], :]
    valid = (h_ok[:, None, :, None] & w_ok[None, :, None, :])[None, ..., None]
    valid = np.broadcast_to(valid, patches.shape)
    taps = w.shape[0] * w.shape[1] * channels
    out = _matmul(patches.reshape(-1, taps), w.reshape(taps, -1), mode, valid.reshape(-1, taps))
    return out.reshape(batch, out_h, out_w, w.shape[3])


def conv2d_backprop_input(input_shape, w, dy, strides=1, padding="SAME", dilations=1,
                          multiplier: str | Multiplier = "acc32") -> np.ndarray:
    """dx = dy (*) w^T for conv2d (dy the left operand): [N, H, W, C] float64 of shape `input_shape`."""
    w, dy, mode = np.asarray(w, np.float32), np.asarray(dy, np.float32), parse(multiplier)
    input_shape = tuple(int(v) for v in input_shape)
    (ih, h_ok), (iw, w_ok) = _conv_geometry(input_shape, w.shape, strides, padding, dilations)
    _check_dy(dy, input_shape[0], ih, iw, w.shape[3])
    dx = np.zeros(input_shape, dtype=np.float64)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            oh, ow = np.flatnonzero(h_ok[:, i]), np.flatnonzero(w_ok[:, j])
            if oh.size == 0 or ow.size == 0:
                continue
            dy_tap = dy[:, oh][:, :, ow].reshape(-1, dy.shape[3])  # [N*oh*ow, O]
            grad = _matmul(dy_tap, w[i, j].T, mode)  # [N*oh*ow, C]; one tap maps outputs to inputs one to one
            dx[:, ih[oh, i][:, None], iw[ow, j][None, :], :] += grad.reshape(dy.shape[0], oh.size, ow.size, -1)
    return dx


def conv2d_backprop_filter(x, filter_shape, dy, strides=1, padding="SAME", dilations=1,
                           multiplier: str | Multiplier = "acc32") -> np.ndarray:
    """dw = x^T (*) dy for conv2d (x the left operand): [kh, kw, C, O] float64 of shape `filter_shape`."""
    x, dy, mode = np.asarray(x, np.float32), np.asarray(dy, np.float32), parse(multiplier)
    filter_shape = tuple(int(v) for v in filter_shape)
    (ih, h_ok), (iw, w_ok) = _conv_geometry(x.shape, filter_shape, strides, padding, dilations)
    _check_dy(dy, x.shape[0], ih, iw, filter_shape[3])
    dw = np.zeros(filter_shape, dtype=np.float64)
    for i in range(filter_shape[0]):
        for j in range(filter_shape[1]):
            oh, ow = np.flatnonzero(h_ok[:, i]), np.flatnonzero(w_ok[:, j])
            if oh.size == 0 or ow.size == 0:
                continue
            x_tap = x[:, ih[oh, i]][:, :, iw[ow, j]].reshape(-1, x.shape[3])  # [N*oh*ow, C]
            dy_tap = dy[:, oh][:, :, ow].reshape(-1, dy.shape[3])  # [N*oh*ow, O]
            dw[i, j] = _matmul(np.ascontiguousarray(x_tap.T), dy_tap, mode)
    return dw


def _check_dy(dy: np.ndarray, batch: int, ih: np.ndarray, iw: np.ndarray, out_channels: int) -> None:
    expected = (batch, ih.shape[0], iw.shape[0], out_channels)
    if dy.shape != expected:
        raise ValueError(f"dy has shape {dy.shape}; this convolution's output (and so dy) is {expected}")
