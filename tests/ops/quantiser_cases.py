"""The quantiser's test cases, shared by the CPU test (tests/ops/test_integer_quantiser.py) and the GPU one
(tests/device/test_gpu_integer.py): values where each rule of the spec acts, scales and zero points of every code
space, and the reference's bytes and masks."""

from __future__ import annotations

import numpy as np

from ops.modes import integer_reference as ir

RNG = np.random.default_rng(20261129)
CODE_SPACES = [ir.CodeSpace(kind, scheme) for kind in ("signed", "unsigned") for scheme in ("symmetric", "asymmetric")]
SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e-40, -1e-40, 1.1754942e-38, -1.1754942e-38, 0.0, -0.0,
                    3.4e38, -3.4e38, 1e30, -1e30], np.float32)


def values(shape, scale: float, zero: float, qmin: int, qmax: int) -> np.ndarray:
    """Random values over a bit more than the codes' range, with every special value and the clamp's edges (u = qmin
    - 1 .. qmin + 1 and qmax - 1 .. qmax + 1) and ties (an odd multiple of s / 2) among them."""
    x = np.array(((RNG.random(shape) * 1.2 - 0.1) * (qmax - qmin) + qmin - zero) * scale, np.float32)
    flat = x.reshape(-1)
    edges = np.array([qmin - 1, qmin, qmin + 1, qmax - 1, qmax, qmax + 1], np.float32) - np.float32(zero)
    ties = (np.arange(-7, 8, dtype=np.float32) + np.float32(0.5)) * np.float32(scale)
    extra = np.concatenate([SPECIAL, edges * np.float32(scale), ties])
    flat[:extra.size] = extra[:flat.size]
    return x


def scales(codes: ir.CodeSpace, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Scales (1.0 among them: exact ties) and zero points in the code space."""
    scale = (RNG.random(channels) * 0.05 + 1e-3).astype(np.float32)
    scale[0] = 1.0
    if codes.scheme == "symmetric":
        zero = np.full(channels, 0.0 if codes.kind == "signed" else 128.0, np.float32)
    else:
        zero = RNG.integers(codes.qmin, codes.qmax + 1, channels).astype(np.float32)
    return scale, zero


def expected(x, scale, zero, codes):
    s, z = (scale[0], zero[0]) if scale.size == 1 else (scale, zero)
    return (ir.quantise(x, s, z, codes) % 256).astype(np.uint8), ir.in_range(x, s, z, codes)
