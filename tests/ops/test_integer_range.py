"""The integer modes' range op (ops/cc/integer_quantise.h's finite_range, integer_quantise_cpu.cc) through both
bindings: the TensorFlow op AmdnnFiniteRange and torch.ops.amdnn.finite_range, lo and hi bit for bit (a zero bound is
+0) against the numpy reference's tensor_range and finite against numpy's isfinite, per tensor and per channel, on
the values where a rule acts (NaN, infinities, subnormals, signed zeros, the largest finite values), on tensors
split over the thread pool with a tail that fills no vector, on channels that hold only non-finite values or only
zeros, and on empty ones; bad input refused with the reason. The GPU kernel: tests/device/test_gpu_integer.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch

from ops.modes import integer_reference as ir
from ops.tf_binding import api
from ops.torch_binding import ops as torch_ops

from tests.ops.range_cases import SHAPES, expected, values


def _run_tf(x, per_channel):
    return tuple(t.numpy() for t in api.finite_range(x, per_channel))


def _run_torch(x, per_channel):
    return tuple(t.numpy() for t in torch_ops.finite_range(torch.from_numpy(x), per_channel))


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("shape,per_channel", SHAPES)
def test_both_bindings_equal_the_reference_bit_for_bit(shape, per_channel):
    x = values(shape)
    want_lo, want_hi, want_finite = expected(x, per_channel)
    for run in (_run_tf, _run_torch):
        lo, hi, finite = run(x, per_channel)
        assert lo.shape == hi.shape == finite.shape == want_lo.shape and finite.dtype == np.bool_, run.__name__
        assert np.array_equal(_bits(lo), _bits(want_lo)), (run.__name__, lo, want_lo)
        assert np.array_equal(_bits(hi), _bits(want_hi)), (run.__name__, hi, want_hi)
        assert np.array_equal(finite, want_finite), run.__name__
    if x.size > 100:  # the cases reached: bounds on both sides, and both answers of finite
        assert (want_lo < 0).any() and (want_hi > 0).any()
        assert want_finite.any() if per_channel else True
        assert not want_finite.all()


def test_hand_written_ranges():
    """Expectations written out, independent of the reference: subnormals and -0 count as +0, non-finite values are
    left out of the bounds and make finite False, a channel of zeros has +0 bounds."""
    x = np.array([[np.nan, 1e-40, -0.0, 0.0],
                  [2.0, -1e-40, -0.0, 3.4e38],
                  [-5.0, 0.5, -0.0, -np.inf]], np.float32)
    for run in (_run_tf, _run_torch):
        lo, hi, finite = run(x, True)
        assert lo.tolist() == [-5.0, 0.0, 0.0, 0.0] and _bits(lo[1:]).tolist() == [0, 0, 0], run.__name__
        assert hi.tolist() == [2.0, 0.5, 0.0, np.float32(3.4e38)] and _bits(hi[2]) == 0, run.__name__
        assert finite.tolist() == [False, True, True, False], run.__name__
        lo, hi, finite = run(x, False)
        assert (lo.tolist(), hi.tolist(), finite.tolist()) == ([-5.0], [np.float32(3.4e38)], [False])
        lo, hi, finite = run(np.array([3.0, 1e-40, 7.0], np.float32), False)
        assert _bits(lo).tolist() == [0] and hi.tolist() == [7.0] and finite.tolist() == [True]


def test_layers_functions_equal_the_reference():
    """ops.keras_integer's tensor_range and all_finite (what the layers call) on the op: scalars per tensor."""
    from ops import keras_integer

    x = values((16, 9, 9, 8))
    lo, hi = keras_integer.tensor_range(x)
    want_lo, want_hi = ir.tensor_range(x)
    assert np.shape(lo) == () and (_bits(lo), _bits(hi)) == (_bits(want_lo), _bits(want_hi))
    assert bool(keras_integer.all_finite(x)) is False and bool(keras_integer.all_finite(np.ones(3, np.float32)))
    lo, hi = keras_integer.tensor_range(x, per_channel=True)
    want_lo, want_hi = ir.tensor_range(x, per_channel=True)
    assert np.array_equal(_bits(lo), _bits(want_lo)) and np.array_equal(_bits(hi), _bits(want_hi))


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(tf.errors.InvalidArgumentError, match="rank"):
        api.finite_range(np.float32(1.0), per_channel=True)
    with pytest.raises(RuntimeError, match="per-channel ranges need an x of rank 1 or more"):
        torch_ops.finite_range(torch.tensor(1.0), per_channel=True)
    with pytest.raises(RuntimeError, match="x must be float32"):
        torch_ops.finite_range(torch.zeros(4, 3, dtype=torch.float64))
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        api.finite_range(tf.zeros((4, 3), tf.float64))
