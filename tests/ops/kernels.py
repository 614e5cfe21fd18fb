"""What the compiled-kernel tests share: the modes to run (one list, from the registry), raw-op access, the operand
sets of single-product checks and the checks themselves (also run by level_check.py in a subprocess per CPU level).
"""

from __future__ import annotations

import numpy as np
import pytest

import ops
from ops.modes import reference
from ops.modes.arguments import kernel_arguments
from ops.modes.operands import random_operands, same_bits, special_operands
from ops.tf_binding.library import library

from tests.ops.luts import lut_dir


def kernel_modes() -> list[str]:
    """Every simulated mode of the registry plus the three published tables as lut modes."""
    tables = [f"lut:{lut_dir() / name}" for name in ("MBM_7.bin", "MIT_7.bin", "ACC_7.bin")]
    return ops.names(include_native=False) + tables


def raw_matmul(a, b, multiplier, transpose_a=False, transpose_b=False) -> np.ndarray:
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_mat_mul(np.asarray(a, np.float32), np.asarray(b, np.float32), table, multiplier=attr,
                                   transpose_a=transpose_a, transpose_b=transpose_b).numpy()


def raw_conv_backprop_input(input_sizes, w, dy, multiplier, strides=(1, 1), padding="VALID", dilations=(1, 1)):
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_conv2d_backprop_input(
        np.asarray(input_sizes, np.int32), np.asarray(w, np.float32), np.asarray(dy, np.float32), table,
        multiplier=attr, strides=list(strides), padding=padding, dilations=list(dilations)).numpy()


def raw_conv_backprop_filter(x, filter_sizes, dy, multiplier, strides=(1, 1), padding="VALID", dilations=(1, 1)):
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_conv2d_backprop_filter(
        np.asarray(x, np.float32), np.asarray(filter_sizes, np.int32), np.asarray(dy, np.float32), table,
        multiplier=attr, strides=list(strides), padding=padding, dilations=list(dilations)).numpy()


def fast_path_operands(n: int, seed: int) -> np.ndarray:
    """Operands every product of which stays in range (biased exponents 64..190): the fast kernel's domain, with
    mantissas concentrated at the carry boundaries and zeros mixed in (ReLU outputs), and subnormals, which are rule 2
    zeros that keep the fast path but carry mantissa fields (the table kernels must look nothing up for them)."""
    rng = np.random.default_rng(seed)
    exponent = rng.integers(64, 191, n).astype(np.uint32) << 23
    boundary = np.array([0, 1, (1 << 22) - 1, 1 << 22, (1 << 22) + 1, (1 << 23) - 1, 0x3F0000, 0x400000,
                         0x410000, 0x7F0000, 0x76_0000, 0x75_FFFF, 0x7A_FFFF], np.uint32)
    field = np.where(rng.random(n) < 0.3, boundary[rng.integers(0, boundary.size, n)],
                     rng.integers(0, 1 << 23, n).astype(np.uint32))
    sign = rng.integers(0, 2, n).astype(np.uint32) << 31
    values = (sign | exponent | field).view(np.float32)
    values[rng.random(n) < 0.05] = 0.0
    subnormal = rng.random(n) < 0.02
    values[subnormal] = (sign[subnormal] | rng.integers(1, 1 << 23, int(subnormal.sum())).astype(np.uint32)).view(
        np.float32)
    return values


def operand_sets():
    specials = special_operands()
    randoms = random_operands(2 * 400, seed=7)
    fast = fast_path_operands(2 * 400, seed=8)
    return {
        "special": (specials, specials),
        "random": (randoms[:400], randoms[400:]),  # 160,000 pairs
        "fast": (fast[:400], fast[400:]),
    }


OPERANDS = operand_sets()


def assert_products(out, left, right, multiplier):
    expected = reference.product(left[:, None], right[None, :], multiplier)
    same = same_bits(out.reshape(expected.shape), expected)
    if not same.all():
        i, j = np.argwhere(~same)[0]
        pytest.fail(f"{multiplier}: {int((~same).sum())} of {same.size} products differ; first: "
                    f"{left[i]!r} (0x{left[i].view(np.uint32):08x}) x {right[j]!r} (0x{right[j].view(np.uint32):08x})"
                    f" -> kernel {out.reshape(expected.shape)[i, j]!r}, reference {expected[i, j]!r}")


def assert_gradient_products(multiplier, left, right):
    """Both conv gradients one product at a time, in the definition's operand order."""
    n, k = left.size, right.size
    # dx = dy (*) w^T with one output channel: dx[n,0,0,c] = dy[n] (*) w[c] (dy is the left operand).
    dx = raw_conv_backprop_input([n, 1, 1, k], right.reshape(1, 1, k, 1), left.reshape(n, 1, 1, 1), multiplier)
    assert_products(dx, left, right, multiplier)
    # dw = x^T (*) dy with one pixel: dw[0,0,c,o] = x[c] (*) dy[o] (x is the left operand).
    dw = raw_conv_backprop_filter(left.reshape(1, 1, 1, n), [1, 1, n, k], right.reshape(1, 1, 1, k), multiplier)
    assert_products(dw, left, right, multiplier)
