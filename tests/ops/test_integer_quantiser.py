"""The integer modes' quantiser (ops/cc/integer_quantise.h, integer_quantise_cpu.cc) through both bindings: the
TensorFlow op AmdnnQuantise and torch.ops.amdnn.quantise, bytes and straight-through masks bit for bit against the
numpy reference (ops/modes/integer_reference quantise and in_range) for every code space, per tensor and per
channel, on the values where a rule acts (NaN, infinities, subnormals, signed zeros, ties, quotients past fp32, the
clamp's edges) and on tensors long enough to be split over the thread pool; and bad input refused with the reason.
The GPU kernel is checked through the layers by tests/device/test_gpu_integer_layers.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch

from ops.modes import integer_reference as ir
from ops.tf_binding import api
from ops.torch_binding import ops as torch_ops

from tests.ops.quantiser_cases import CODE_SPACES, expected, scales, values


def _run_tf(x, scale, zero, codes):
    b, m = api.quantise(x, scale, zero, codes.qmin, codes.qmax)
    return b.numpy(), m.numpy()


def _run_torch(x, scale, zero, codes):
    b, m = torch_ops.quantise(torch.from_numpy(x), torch.from_numpy(scale), torch.from_numpy(zero), codes.qmin,
                              codes.qmax)
    return b.numpy(), m.numpy()


@pytest.mark.parametrize("codes", CODE_SPACES, ids=lambda c: f"{c.kind}-{c.scheme}")
@pytest.mark.parametrize("shape,per_channel", [((7, 5, 33), False), ((7, 5, 33), True), ((300, 1000), True),
                                               ((3, 70001), False), ((), False), ((0, 4), True)])
def test_both_bindings_equal_the_reference_bit_for_bit(codes, shape, per_channel):
    channels = shape[-1] if per_channel else 1
    scale, zero = scales(codes, channels)
    x = values(shape, float(scale[0]), float(zero[0]), codes.qmin, codes.qmax)
    want_bytes, want_mask = expected(x, scale, zero, codes)
    for run in (_run_tf, _run_torch):
        got_bytes, got_mask = run(x, scale, zero, codes)
        assert got_bytes.shape == x.shape and got_mask.dtype == np.bool_
        wrong = np.argwhere(got_bytes != want_bytes)
        assert not wrong.size, (f"{run.__name__}: {len(wrong)} codes differ, first at {wrong[0]}: "
                                f"x={x[tuple(wrong[0])]!r} got {got_bytes[tuple(wrong[0])]}, "
                                f"want {want_bytes[tuple(wrong[0])]}")
        assert np.array_equal(got_mask, want_mask), run.__name__
    if x.size > 100:  # the cases reached: something clamped, something passed, a non-finite value masked
        assert want_mask.any() and not want_mask.all()


def test_special_values_give_the_spec_codes():
    """Hand-written expectations, independent of the reference: signed symmetric codes, s = 1, z = 0."""
    codes = ir.CodeSpace("signed", "symmetric")
    x = np.array([np.nan, np.inf, -np.inf, 1e-40, -0.0, 0.5, 1.5, 2.5, -2.5, 126.6, 127.4, 127.5, -127.5, -1.0, 1e30],
                 np.float32)
    want_codes = [0, 0, 0, 0, 0, 0, 2, 2, -2, 127, 127, 127, -127, -1, 127]
    want_mask = [False, False, False, True, True, True, True, True, True, True, True, False, False, True, False]
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    for run in (_run_tf, _run_torch):
        got_bytes, got_mask = run(x, one, zero, codes)
        assert got_bytes.tolist() == [c % 256 for c in want_codes], run.__name__
        assert got_mask.tolist() == want_mask, run.__name__


def test_bad_input_is_refused_with_the_reason():
    x = np.zeros((4, 3), np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"codes \[-128, 255\] are not one kind's bytes"):
        api.quantise(x, one, zero, -128, 255)
    with pytest.raises(RuntimeError, match=r"codes \[10, 5\] are not one kind's bytes"):
        torch_ops.quantise(torch.from_numpy(x), torch.from_numpy(one), torch.from_numpy(zero), 10, 5)
    two = np.ones(2, np.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"one per index of the input's last axis \(3\)"):
        api.quantise(x, two, two, -127, 127)
    with pytest.raises(RuntimeError, match=r"one per index of x's last axis \(3\)"):
        torch_ops.quantise(torch.from_numpy(x), torch.from_numpy(two), torch.from_numpy(two), -127, 127)
    with pytest.raises(RuntimeError, match="x must be float32"):
        torch_ops.quantise(torch.zeros(4, 3, dtype=torch.float64), torch.from_numpy(one), torch.from_numpy(zero),
                           -127, 127)
