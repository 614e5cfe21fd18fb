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

from tests.ops.kernels import OPERANDS, assert_gradient_products, assert_products, kernel_modes, raw_matmul


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
