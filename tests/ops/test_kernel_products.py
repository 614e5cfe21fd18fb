"""Compiled kernels, one product at a time, bit for bit against the numpy reference of every mode.

A product with inner dimension 1 ([N,1] x [1,K]) has no accumulation, so each output element is one product of the
multiplier. Each kernel entry point is checked this way (matmul and its transposed forms, conv2d, both conv
gradients), on three operand sets: every pair of the special operands (zeros, subnormals, inf, NaN, carry
boundaries at the range edges: the generic kernel), >= 10^5 random pairs over all exponents (generic kernel), and
>= 10^5 pairs of moderate exponents with boundary mantissas (the vectorised fast kernel).
"""

from __future__ import annotations

import numpy as np
import pytest

import ops
from ops import reference

from conftest import random_operands, same_bits, special_operands
from kernels import kernel_modes, raw_conv_backprop_filter, raw_conv_backprop_input, raw_matmul


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


@pytest.mark.parametrize("operands", sorted(OPERANDS))
@pytest.mark.parametrize("multiplier", kernel_modes())
def test_matmul_single_products(multiplier, operands):
    left, right = OPERANDS[operands]
    assert_products(ops.matmul(left[:, None], right[None, :], multiplier=multiplier).numpy(), left, right, multiplier)


@pytest.mark.parametrize("multiplier", kernel_modes())
def test_transposed_matmul_single_products(multiplier):
    left, right = OPERANDS["fast"]
    out = raw_matmul(left[None, :], right[:, None], multiplier, transpose_a=True, transpose_b=True)
    assert_products(out, left, right, multiplier)


@pytest.mark.parametrize("operands", ["special", "fast"])
@pytest.mark.parametrize("multiplier", kernel_modes())
def test_conv2d_single_products(multiplier, operands):
    left, right = OPERANDS[operands]
    # A 1x1 one-channel conv: x [N,1,1,1], w [1,1,1,K] -> y[n,0,0,k] = x[n] (*) w[k].
    y = ops.conv2d(left.reshape(-1, 1, 1, 1), right.reshape(1, 1, 1, -1), multiplier=multiplier).numpy()
    assert_products(y, left, right, multiplier)


def assert_gradient_products(multiplier, left, right):
    """Both conv gradients one product at a time, in the definition's operand order."""
    n, k = left.size, right.size
    # dx = dy (*) w^T with one output channel: dx[n,0,0,c] = dy[n] (*) w[c] (dy is the left operand).
    dx = raw_conv_backprop_input([n, 1, 1, k], right.reshape(1, 1, k, 1), left.reshape(n, 1, 1, 1), multiplier)
    assert_products(dx, left, right, multiplier)
    # dw = x^T (*) dy with one pixel: dw[0,0,c,o] = x[c] (*) dy[o] (x is the left operand).
    dw = raw_conv_backprop_filter(left.reshape(1, 1, 1, n), [1, 1, n, k], right.reshape(1, 1, 1, k), multiplier)
    assert_products(dw, left, right, multiplier)


@pytest.mark.parametrize("operands", ["special", "fast"])
@pytest.mark.parametrize("multiplier", kernel_modes())
def test_conv2d_gradient_single_products(multiplier, operands):
    assert_gradient_products(multiplier, *OPERANDS[operands])


def test_lut_tables_of_any_width(tmp_path):
    """A 3-bit, non-symmetric table: read, used with its own m, left operand as the first index."""
    rng = np.random.default_rng(3)
    table = rng.integers(0, 8, (8, 8), dtype=np.uint8) | (rng.integers(0, 2, (8, 8), dtype=np.uint8) << 7)
    path = tmp_path / "skewed_3.bin"
    ops.write_table(table, path)
    multiplier = f"lut:{path}"
    for operands in ("fast", "special"):
        left, right = OPERANDS[operands]
        assert_products(ops.matmul(left[:, None], right[None, :], multiplier=multiplier).numpy(), left, right,
                        multiplier)
        assert_gradient_products(multiplier, left, right)


def test_modes_differ_from_each_other():
    """The attribute really switches the multiplier at run time (no recompiling): each mode gives its own bits."""
    left, right = OPERANDS["fast"]
    outputs = {m: ops.matmul(left[:, None], right[None, :], multiplier=m).numpy().tobytes()
               for m in ops.names(include_native=False)}
    assert len(set(outputs.values())) == len(outputs)
