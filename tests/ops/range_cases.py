"""The range op's test cases, shared by the CPU test (tests/ops/test_integer_range.py) and the GPU one
(tests/device/test_gpu_integer.py): shapes, values where each rule of the spec acts, and the reference's answers."""

from __future__ import annotations

import numpy as np

from ops.modes import integer_reference as ir
from tests.ops.quantiser_cases import SPECIAL

RNG = np.random.default_rng(20261130)

# (shape, per_channel): small; long enough for several blocks of the thread pool with a tail of 19 values (per
# tensor: 210,003 = 3,281 rows of 64 lanes + 19); per channel over many rows; a scalar; empty tensors.
SHAPES = [((7, 5, 33), False), ((7, 5, 33), True), ((3, 70001), False), ((300, 1000), True), ((3, 3, 64, 512), True),
          ((70001,), True), ((), False), ((0, 4), True), ((0, 4), False), ((4, 0), True)]


def values(shape) -> np.ndarray:
    """Random values of both signs and many binades, every special value among them near the start; per channel,
    channel 1 all zeros (+0 and -0), channel 2 only non-finite values, channel 3 all positive, channel 4 all
    negative (where the tensor has such channels and at least 2 rows)."""
    x = np.array(RNG.standard_normal(shape) * np.exp2(RNG.integers(-20, 20, shape)), np.float32)
    flat = x.reshape(-1)
    flat[:SPECIAL.size] = SPECIAL[:flat.size]
    if x.ndim >= 2 and x.shape[-1] > 4 and x.size // x.shape[-1] >= 2:
        rows = x.reshape(-1, x.shape[-1])
        rows[:, 1] = np.where(np.arange(rows.shape[0]) % 2, np.float32(0.0), np.float32(-0.0))
        rows[:, 2] = np.where(np.arange(rows.shape[0]) % 2, np.float32(np.nan), np.float32(-np.inf))
        rows[:, 3] = np.abs(rows[:, 3]) + np.float32(1e-3)
        rows[:, 4] = -np.abs(rows[:, 4]) - np.float32(1e-3)
    return x


def expected(x: np.ndarray, per_channel: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, finite) of the reference: shape [1], or per channel [the last axis' size]."""
    if per_channel:
        if x.shape[-1] == 0:
            empty = np.zeros(0, np.float32)
            return empty, empty, np.zeros(0, bool)
        lo, hi = ir.tensor_range(x, per_channel=True)
        finite = np.isfinite(x.reshape(-1, x.shape[-1])).all(axis=0)
        return lo, hi, finite
    lo, hi = ir.tensor_range(x)
    return np.array([lo], np.float32), np.array([hi], np.float32), np.array([np.isfinite(x).all()])
