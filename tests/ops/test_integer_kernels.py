"""The integer modes' compiled op on the CPU (ops/cc/integer_conv_cpu.cc) through both bindings: the TensorFlow op
AmdnnIntConv2D and torch.ops.amdnn.int_conv2d, bit for bit against the numpy reference (ops/modes/integer_reference:
im2col of the codes padded with the zero point, the exact sums with the zero-point terms, one rounding each from the
integer and of the product), on random tables reaching both ends of the int16 and uint16 ranges, every geometry the
layers use, K up to the largest the int32 sums hold, and bad input. The level the kernel was built for (AVX-512,
AVX2 or the generic loop) is this machine's; tests/ops/test_kernel_targets.py builds the lower levels.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch

from ops.modes import integer_reference as ir
from ops.tf_binding import api
from ops.torch_binding import ops as torch_ops

RNG = np.random.default_rng(20261128)
MAX_TAPS = 32768  # kIntMaxTaps of ops/cc/integer_conv.h


def _table(signed: bool) -> np.ndarray:
    """A random asymmetric table whose entries include the ends of the range (int16 or uint16)."""
    low, high = (-32768, 32767) if signed else (0, 65535)
    table = RNG.integers(low, high + 1, (256, 256), dtype=np.int64)
    table[0, 0], table[255, 255], table[7, 200] = low, high, high
    return table


def _expected(x_codes, w_codes, table, zero_a, zero_w, rescale, signed, strides, padding, dilations) -> np.ndarray:
    """The reference: y = fl32(fl32(acc) x rescale[c]) with acc from integer_reference (values, not bytes)."""
    values = (lambda b: b.astype(np.int8).astype(np.int64)) if signed else (lambda b: b.astype(np.int64))
    patches = ir.im2col(values(x_codes), w_codes.shape[:2], strides, padding, dilations, fill=zero_a)
    rows = patches.reshape(-1, patches.shape[-1])
    acc = ir.accumulate(rows, zero_a, values(w_codes).reshape(-1, w_codes.shape[3]), zero_w, table)
    y = ir.fl32(ir.fl32(acc.astype(np.float64)).astype(np.float64) * rescale.astype(np.float64))
    return y.reshape(*patches.shape[:3], w_codes.shape[3])


def _exact_table(signed: bool) -> np.ndarray:
    """The exact products of the codes' values, indexed by their bytes: the table the kernel takes its
    integer multiply-add path for (the int8 / uint8 modes without a circuit)."""
    values = np.arange(256, dtype=np.uint8)
    values = values.astype(np.int8).astype(np.int64) if signed else values.astype(np.int64)
    return np.outer(values, values)


def _case(signed, x_shape, w_shape, table_kind="random"):
    """Random codes, zero points and rescales. table_kind: "random" (the differences T[a, w] - T[z_a, w] span up to
    2^17: the gathers), "exact" (the multiply-add path), "circuit" (z_a's row 0, as a circuit's at a ReLU layer's or
    a symmetric zero point, and half the codes at z_a: the differences span 65535, the most the permute look-ups of
    AVX-512 take)."""
    x = RNG.integers(0, 256, x_shape, dtype=np.uint8)
    w = RNG.integers(0, 256, w_shape, dtype=np.uint8)
    low, high = (-128, 127) if signed else (0, 255)
    zero_a = int(RNG.integers(low, high + 1))
    zero_w = RNG.integers(low, high + 1, w_shape[3]).astype(np.int32)
    rescale = (RNG.random(w_shape[3]) * 1e-4).astype(np.float32)
    table = _exact_table(signed) if table_kind == "exact" else _table(signed)
    if table_kind == "circuit":
        table[zero_a & 255] = 0
        x = np.where(RNG.random(x_shape) < 0.5, np.uint8(zero_a & 255), x)
    return x, w, table, zero_a, zero_w, rescale


def _run_tf(x, w, table, zero_a, zero_w, rescale, signed, strides, padding, dilations) -> np.ndarray:
    return api.int_conv2d_codes(x, w, table.astype(np.int32).reshape(-1), np.array([zero_a], np.int32), zero_w,
                                rescale, signed, strides, padding, dilations).numpy()


def _run_torch(x, w, table, zero_a, zero_w, rescale, signed, strides, padding, dilations) -> np.ndarray:
    t = torch.from_numpy
    return torch_ops.int_conv2d_codes(t(x), t(w), t(table.astype(np.int32).reshape(-1)),
                                      torch.tensor([zero_a], dtype=torch.int32), t(zero_w), t(rescale), signed,
                                      strides, padding.lower(), dilations).numpy()


GEOMETRIES = [  # x NHWC, w HWIO, strides, padding, dilations: the layers' shapes and every edge of the kernel
    ((2, 9, 7, 3), (3, 3, 3, 5), 1, "SAME", 1),            # channels below one vector
    ((2, 9, 8, 16), (3, 3, 16, 40), 2, "SAME", 1),         # one group of 32 and a remainder, stride 2
    ((1, 10, 10, 4), (3, 2, 4, 70), (2, 1), "VALID", 1),   # non-square kernel and strides, 70 channels
    ((1, 11, 11, 2), (3, 3, 2, 9), 1, "SAME", 2),          # dilation
    ((5, 1, 1, 300), (1, 1, 300, 100), 1, "VALID", 1),     # a Dense layer: the 1 x 1 conv of a 1 x 1 image
    ((3, 4, 4, 512), (3, 3, 512, 17), 1, "SAME", 1),       # ResNet's largest K, 4608, with padding
]


@pytest.mark.parametrize("table_kind", ["random", "exact", "circuit"])
@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=[f"{g[0]}x{g[1]}" for g in GEOMETRIES])
def test_both_bindings_equal_the_reference_bit_for_bit(signed, geometry, table_kind):
    """A random table takes the gathers, the exact one the integer multiply-add path (on AVX2 and AVX-512), the
    circuit-like one the permutes on AVX-512 (the gathers on AVX2)."""
    x_shape, w_shape, strides, padding, dilations = geometry
    x, w, table, zero_a, zero_w, rescale = _case(signed, x_shape, w_shape, table_kind)
    expected = _expected(x, w, table, zero_a, zero_w, rescale, signed, strides, padding, dilations)
    args = (x, w, table, zero_a, zero_w, rescale, signed, strides, padding, dilations)
    got_tf, got_torch = _run_tf(*args), _run_torch(*args)
    assert got_tf.shape == expected.shape
    assert np.array_equal(got_tf.view(np.uint32), expected.view(np.uint32))
    assert np.array_equal(got_torch.view(np.uint32), expected.view(np.uint32))


def test_largest_k_with_extreme_entries_stays_exact():
    """K = 32768 taps of the table's largest entry (65535) and codes at the zero point: the int32 sum reaches
    2^15 x 65535 = 2147450880 < 2^31, the int64 terms beyond it; and the one-rounding conversion of acc > 2^24."""
    table = np.full((256, 256), 65535, np.int64)
    x = np.full((1, 1, 1, MAX_TAPS), 255, np.uint8)
    w = np.full((1, 1, MAX_TAPS, 2), 255, np.uint8)
    zero_w = np.array([0, 3], np.int32)
    rescale = np.array([1.0, 0.5], np.float32)
    got = _run_tf(x, w, table, 0, zero_w, rescale, False, 1, "VALID", 1)
    acc = np.array([MAX_TAPS * 65535, MAX_TAPS * 65535 - 3 * 255 * MAX_TAPS], np.int64)
    assert np.array_equal(got.reshape(-1), (acc.astype(np.float32) * rescale).astype(np.float32))
    assert np.array_equal(got, _run_torch(x, w, table, 0, zero_w, rescale, False, 1, "VALID", 1))


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_circuit_like_table_at_the_largest_k_stays_exact(signed):
    """K = 32768 taps of a circuit-like table (the zero point's row 0, so the differences span 65535) at its largest
    entry less its smallest: the permute look-ups' sum of D - min D reaches 2^15 x 65535 < 2^31 before the
    correction by min D x K (-2^30 for the signed table)."""
    low, high = (-32768, 32767) if signed else (0, 65535)
    table = np.full((256, 256), high, np.int64)
    table[0], table[5, 7] = 0, low
    x = np.full((1, 1, 1, MAX_TAPS), 1, np.uint8)
    w = np.full((1, 1, MAX_TAPS, 3), 3, np.uint8)
    zero_w, rescale = np.array([0, 3, 1], np.int32), np.array([1.0, 0.5, 2.0], np.float32)
    args = (x, w, table, 0, zero_w, rescale, signed, 1, "VALID", 1)
    expected = _expected(*args)
    assert np.array_equal(expected.reshape(-1), (np.float32(MAX_TAPS * high) - np.array([0, 3, 1]) * MAX_TAPS)
                          .astype(np.float32) * rescale)
    assert np.array_equal(_run_tf(*args).view(np.uint32), expected.view(np.uint32))
    assert np.array_equal(_run_torch(*args).view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("code, zero_a", [(0, 255), (255, 0)], ids=["negative", "positive"])
def test_exact_path_at_the_largest_k_stays_exact(code, zero_a):
    """The multiply-add path at K = 32768 with every term at its largest magnitude, (code - z_a) x w = -+255 x 255:
    the int32 sum reaches -+2,130,739,200, inside int32's range, and the odd channel count pads the vectors."""
    table = _exact_table(False)
    x = np.full((1, 1, 1, MAX_TAPS), code, np.uint8)
    w = np.full((1, 1, MAX_TAPS, 3), 255, np.uint8)
    zero_w = np.array([0, 7, 255], np.int32)
    rescale = np.array([1.0, 0.25, 3.0], np.float32)
    got = _run_tf(x, w, table, zero_a, zero_w, rescale, False, 1, "VALID", 1)
    acc = (code - zero_a) * (255 - zero_w.astype(np.int64)) * MAX_TAPS
    assert abs(int(acc[0])) > 2**31 - 2**24
    assert np.array_equal(got.reshape(-1), (acc.astype(np.float32) * rescale).astype(np.float32))
    assert np.array_equal(got, _run_torch(x, w, table, zero_a, zero_w, rescale, False, 1, "VALID", 1))


def test_exact_table_with_a_zero_point_outside_the_codes_matches_the_reference():
    """A zero point that is not a code of the kind (200 for signed codes) pads with a byte whose value is not z_a: the
    kernel leaves the multiply-add path (which reads z_a as the padding's value) for the look-ups, which index the
    table by z_a's byte as the reference does."""
    x, w, table, _, zero_w, rescale = _case(True, (2, 6, 6, 8), (3, 3, 8, 20), "exact")
    args = (x, w, table, 200, zero_w, rescale, True, 1, "SAME", 1)
    expected = _expected(*args)
    assert np.array_equal(_run_tf(*args).view(np.uint32), expected.view(np.uint32))
    assert np.array_equal(_run_torch(*args).view(np.uint32), expected.view(np.uint32))


def test_nan_rescale_marks_the_channel_and_results_repeat():
    """A NaN rescale (the layers' mark of a non-finite operand) makes its channel NaN and no other; two calls give
    the same bits (the sums are integers: the thread split cannot change them)."""
    x, w, table, zero_a, zero_w, rescale = _case(True, (4, 8, 8, 8), (3, 3, 8, 12))
    rescale[5] = np.nan
    args = (x, w, table, zero_a, zero_w, rescale, True, 1, "SAME", 1)
    first, second = _run_tf(*args), _run_tf(*args)
    assert np.isnan(first[..., 5]).all() and not np.isnan(np.delete(first, 5, axis=-1)).any()
    assert np.array_equal(first.view(np.uint32), second.view(np.uint32))


def test_bad_input_is_refused_with_the_reason():
    x, w, table, zero_a, zero_w, rescale = _case(True, (1, 4, 4, 2), (3, 3, 2, 3))
    with pytest.raises(tf.errors.InvalidArgumentError, match="65536 int32 products"):
        api.int_conv2d_codes(x, w, np.zeros(10, np.int32), np.array([0], np.int32), zero_w, rescale, True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="one value per output channel"):
        api.int_conv2d_codes(x, w, table.astype(np.int32).reshape(-1), np.array([0], np.int32), zero_w[:2],
                             rescale, True)
    with pytest.raises(tf.errors.InvalidArgumentError, match="the integer sums hold at most 32768"):
        api.int_conv2d_codes(np.zeros((1, 1, 1, MAX_TAPS + 1), np.uint8), np.zeros((1, 1, MAX_TAPS + 1, 1), np.uint8),
                             table.astype(np.int32).reshape(-1), np.array([0], np.int32), np.zeros(1, np.int32),
                             np.ones(1, np.float32), True, padding="VALID")
    t = torch.from_numpy
    with pytest.raises(RuntimeError, match="codes must be uint8"):
        torch_ops.int_conv2d_codes(t(x).int(), t(w), t(table.astype(np.int32).reshape(-1)),
                                   torch.zeros(1, dtype=torch.int32), t(zero_w), t(rescale), True)
    with pytest.raises(RuntimeError, match="zero_a must be 1 int32 value"):
        torch_ops.int_conv2d_codes(t(x), t(w), t(table.astype(np.int32).reshape(-1)),
                                   torch.zeros(2, dtype=torch.int32), t(zero_w), t(rescale), True)
