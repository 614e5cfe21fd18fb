"""Tests of the numpy reference of the integer modes (ops/modes/integer_reference.py) against the section "Integer
modes (8-bit, table products)" of docs/multipliers-spec.md: its three example tables are read from the file, and
the layers are checked against independent float64 / integer loops over the spec's formulas."""

from __future__ import annotations

import re
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ops.modes import integer_reference as ir
from ops.modes.integer_tables import read_integer_table

from tests.ops.spec_tables import markdown_table

LUTS = Path(__file__).resolve().parents[2] / "ops" / "luts" / "evoapprox"


def fp32(cell: str) -> np.float32:
    """The fp32 value of a cell written "`0xBITS` value" (its bits decide)."""
    bits = re.match(r"`0x([0-9A-Fa-f]{8})`", cell)
    assert bits, f"cell {cell!r} does not start with `0x........`"
    return np.array([int(bits[1], 16)], np.uint32).view(np.float32)[0]


def bits(x) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def exact_decimal(text: str) -> np.float32:
    value = np.float32(text)
    assert Fraction(float(value)) == Fraction(text), f"{text} is not an fp32 value: the examples' ranges must be"
    return value


def mode_of(cell: str) -> ir.IntegerMode:
    prefix, _, name = cell.strip("`").partition(":")
    return ir.integer_mode(f"{prefix}:{LUTS / name}" if name else prefix)


def codes(cell: str) -> list[int]:
    return [int(v) for v in cell.split(",")]


# --------------------------------------------------------------------------------------------- the spec's examples

QUANTISER_EXAMPLES = markdown_table("#### Quantiser examples")
SUM_EXAMPLES = markdown_table("#### Sum examples")
RESCALE_EXAMPLES = markdown_table("#### Rescale examples")


def test_the_spec_has_examples_of_every_kind():
    assert len(QUANTISER_EXAMPLES) >= 10 and len(SUM_EXAMPLES) >= 4 and len(RESCALE_EXAMPLES) >= 3
    assert {(row["kind"], row["scheme"]) for row in QUANTISER_EXAMPLES} == {
        ("signed", "symmetric"), ("signed", "asymmetric"), ("unsigned", "symmetric"), ("unsigned", "asymmetric")}


@pytest.mark.parametrize("row", QUANTISER_EXAMPLES, ids=lambda row: f"{row['kind']}-{row['scheme']}-{row['x']}")
def test_quantiser_example(row):
    space = ir.CodeSpace(row["kind"], row["scheme"])
    lo, hi = (exact_decimal(v.strip()) for v in row["lo, hi"].split(","))
    scale, zero = ir.scales_from_range(lo, hi, space)
    assert bits(scale) == bits(fp32(row["s"])) and int(zero) == int(row["z"])
    assert int(ir.quantise(fp32(row["x"]), scale, zero, space)) == int(row["q"])
    clamped = "clamped" in row["how"]
    assert bool(ir.in_range(fp32(row["x"]), scale, zero, space)) is not clamped


@pytest.mark.parametrize("row", SUM_EXAMPLES, ids=lambda row: f"{row['mode']}-{row['a']}")
def test_sum_example(row):
    mode = mode_of(row["mode"])
    a, w = codes(row["a"]), codes(row["w"])
    assert [int(mode.table[i & 255, j & 255]) for i, j in zip(a, w)] == codes(row["T[a_k, w_k]"])
    acc = ir.accumulate(np.array([a]), int(row["z_a"]), np.array([w]).T, np.array([int(row["z_w"])]), mode.table)
    assert acc.tolist() == [[int(row["acc"])]]


@pytest.mark.parametrize("row", RESCALE_EXAMPLES, ids=lambda row: row["acc"])
def test_rescale_example(row):
    y = ir.rescale(np.array([int(row["acc"])]), fp32(row["s_a"]), np.array([fp32(row["s_w"])]))
    assert bits(y) == [bits(fp32(row["y"]))]


def test_rescale_order_matters_where_the_spec_says():
    """acc x fl32(s_a x s_w) against the two orders the spec rules out, on its first example: they differ."""
    s = fp32("`0x3F800800`")
    spec = ir.rescale(np.array([3]), s, np.array([s]))[0]
    left_first = np.float32(np.float32(np.float32(3) * s) * s)
    once = np.float32(Fraction(3) * Fraction(float(s)) ** 2)
    assert bits(spec) == 0x40401800 and bits(left_first) == bits(once) == 0x40401801


# ------------------------------------------------------------------------------------------------------ quantiser


def test_every_tie_rounds_to_even_and_clamps():
    """x = k + 1/2 for k in -131..130 at s = 1: Python's round() (ties to even) then the clamp, by hand."""
    x = np.arange(-131, 131, dtype=np.float32) + np.float32(0.5)
    for kind, scheme in (("signed", "symmetric"), ("signed", "asymmetric"), ("unsigned", "symmetric"),
                         ("unsigned", "asymmetric")):
        space = ir.CodeSpace(kind, scheme)
        zero = {"symmetric": 0 if kind == "signed" else 128, "asymmetric": 7}[scheme]
        expected = [min(max(round(float(v)) + zero, space.qmin), space.qmax) for v in x]
        assert ir.quantise(x, np.float32(1), zero, space).tolist() == expected
        assert ir.in_range(x, np.float32(1), zero, space).tolist() == [
            space.qmin <= round(float(v)) + zero <= space.qmax for v in x]


def test_non_finite_subnormal_and_overflowing_inputs():
    space = ir.CodeSpace("unsigned", "asymmetric")
    x = np.array([np.nan, np.inf, -np.inf, 1e-45, 3e38, -3e38], np.float32)
    q = ir.quantise(x, np.float32(1e-30), 9, space)
    assert q.tolist() == [9, 9, 9, 9, 255, 0]  # non-finite: z; subnormal: zero; x / s = +-inf: clamped
    assert ir.in_range(x, np.float32(1e-30), 9, space).tolist() == [False, False, False, True, False, False]


def test_ranges_and_zero_ranges():
    x = np.array([[-3.0, np.nan], [2.0, np.inf]], np.float32)
    assert [float(v) for v in ir.tensor_range(x)] == [-3.0, 2.0]  # non-finite left out
    lo, hi = ir.tensor_range(np.array([[1.0, -2.0], [4.0, -1.0]], np.float32), per_channel=True)
    assert lo.tolist() == [0.0, -2.0] and hi.tolist() == [4.0, 0.0]  # 0 is always inside
    for scheme in ir.SCHEMES:
        scale, zero = ir.scales_from_range(np.float32(0), np.float32(1e-37), ir.CodeSpace("signed", scheme))
        assert float(scale) == 1.0  # s would be below 2**-126


def test_running_range_update_and_calibration():
    mu, nu = np.float32(0.99), np.float32(1) - np.float32(0.99)
    assert bits(mu) == 0x3F7D70A4 and bits(nu) == 0x3C23D700
    running = ir.calibration_range([(np.float32(-1), np.float32(2)), (np.float32(-0.5), np.float32(3))])
    assert running == (-1.0, 3.0)
    lo, hi = ir.update_running_range(running, (np.float32(-4), np.float32(1)))
    assert bits(lo) == bits(np.float32(np.float32(mu * np.float32(-1)) + np.float32(nu * np.float32(-4))))
    assert bits(hi) == bits(np.float32(np.float32(mu * np.float32(3)) + np.float32(nu * np.float32(1))))
    assert ir.update_running_range(None, (np.float32(-4), np.float32(1))) == (-4.0, 1.0)


# ---------------------------------------------------------------------------------------------------------- names


def test_mode_names():
    assert np.array_equal(ir.integer_mode("int8").table, read_integer_table(LUTS / "mul8s_1KV8.int8s.npy")[0])
    assert np.array_equal(ir.integer_mode("uint8").table, read_integer_table(LUTS / "mul8u_1JFF.int8u.npy")[0])
    assert ir.integer_mode(f"uint8:{LUTS / 'mul8u_2AC.int8u.npy'}").kind == "unsigned"
    with pytest.raises(ValueError, match="signed table"):
        ir.integer_mode(f"uint8:{LUTS / 'mul8s_1L2H.int8s.npy'}")
    with pytest.raises(ValueError, match="int8, int8_asym, uint8, uint8_sym"):
        ir.integer_mode("int4")
    assert (ir.integer_mode("int8_asym").kind, ir.integer_mode("int8_asym").scheme) == ("signed", "asymmetric")
    assert ir.code_space(ir.integer_mode("uint8_sym")) == ir.CodeSpace("unsigned", "symmetric")


# ---------------------------------------------------------------------------------------------------------- sums


@pytest.mark.parametrize("kind, table", [("signed", "mul8s_1KV8.int8s.npy"), ("unsigned", "mul8u_1JFF.int8u.npy")])
def test_exact_tables_give_the_integer_matmul(kind, table):
    """64 x 256 x 64 codes: the exact circuit's sums equal an int64 matmul, with and without zero points; < 1 s."""
    rng = np.random.default_rng(1)
    low, high = (-128, 128) if kind == "signed" else (0, 256)
    a, w = rng.integers(low, high, (64, 256)), rng.integers(low, high, (256, 64))
    zero_w = rng.integers(low, high, 64)
    table = read_integer_table(LUTS / table)[0]
    start = time.perf_counter()
    sums = ir.table_sum(a, w, table)
    assert time.perf_counter() - start < 1.0
    assert np.array_equal(sums, a @ w)
    assert np.array_equal(ir.accumulate(a, 3, w, zero_w, table), (a - 3) @ (w - zero_w[None, :]))


def spec_dense(x, w, table, kind, scheme):
    """The spec's formulas by loops, with numpy's own float32 arithmetic (IEEE, no flush needed at these sizes)."""
    space = ir.CodeSpace(kind, scheme)
    f = np.float32

    def scale_zero(values):
        lo, hi = min(0.0, float(values.min())), max(0.0, float(values.max()))
        if scheme == "symmetric":
            s = f(f(max(-lo, hi)) / f(127))
            return s, (0 if kind == "signed" else 128)
        s = f(f(f(hi) - f(lo)) / f(255))
        return s, min(max(space.qmin + round(float(np.rint(f(f(-lo) / s)))), space.qmin), space.qmax)

    def code(v, s, z):
        return min(max(int(np.rint(f(f(v) / s))) + z, space.qmin), space.qmax)

    s_a, z_a = scale_zero(x)
    y = np.zeros((x.shape[0], w.shape[1]), np.float32)
    for c in range(w.shape[1]):
        s_w, z_w = scale_zero(w[:, c])
        for i in range(x.shape[0]):
            acc = 0
            for k in range(x.shape[1]):
                qa, qw = code(x[i, k], s_a, z_a), code(w[k, c], s_w, z_w)
                acc += int(table[qa & 255, qw & 255]) - z_w * qa - z_a * qw + z_a * z_w
            y[i, c] = f(f(acc) * f(s_a * s_w))
    return y


@pytest.mark.parametrize("name, scheme", [("mul8u_2AC.int8u.npy", "asymmetric"), ("mul8u_13QR.int8u.npy", "symmetric"),
                                          ("mul8s_1KR3.int8s.npy", "symmetric"),
                                          ("mul8s_1L2H.int8s.npy", "asymmetric")])
def test_approximate_dense_forward_is_the_spec_formula(name, scheme):
    mode = ir.integer_mode(f"{'uint8' if name.startswith('mul8u') else 'int8'}:{LUTS / name}")
    rng = np.random.default_rng(2)
    x = rng.normal(0.3, 1.0, (5, 17)).astype(np.float32)
    w = rng.normal(0.0, 0.2, (17, 4)).astype(np.float32)
    y = ir.dense_forward(x, w, mode, scheme)
    assert np.array_equal(bits(y), bits(spec_dense(x, w, mode.table, mode.kind, scheme)))
    exact = ir.dense_forward(x, w, ir.integer_mode(mode.name.split(":")[0]), scheme)
    assert not np.array_equal(y, exact)  # the table did act


def test_dense_forward_bias_and_non_finite_operands():
    mode = ir.integer_mode("int8")
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(3, 8)).astype(np.float32), rng.normal(size=(8, 4)).astype(np.float32)
    bias = np.array([0.5, -1, 0, 2], np.float32)
    y = ir.dense_forward(x, w, mode)
    assert np.array_equal(ir.dense_forward(x, w, mode, bias=bias), (y + bias).astype(np.float32))
    w_bad = w.copy()
    w_bad[2, 1] = np.inf
    y_bad = ir.dense_forward(x, w_bad, mode)
    assert np.isnan(y_bad[:, 1]).all() and np.array_equal(np.delete(y_bad, 1, axis=1), np.delete(y, 1, axis=1))
    x_bad = x.copy()
    x_bad[0, 0] = np.nan
    assert np.isnan(ir.dense_forward(x_bad, w, mode)).all()


# ----------------------------------------------------------------------------------------------------------- conv


def float_patches(x, kh, kw, stride, padding):
    """[N, Ho, Wo, kh * kw * C] float patches with TF's geometry, padding with the real value 0 (loops)."""
    n, h, wd, c = x.shape
    if padding == "SAME":
        out_h, out_w = -(-h // stride), -(-wd // stride)
        top = max((out_h - 1) * stride + kh - h, 0) // 2
        left = max((out_w - 1) * stride + kw - wd, 0) // 2
    else:
        out_h, out_w, top, left = (h - kh) // stride + 1, (wd - kw) // stride + 1, 0, 0
    out = np.zeros((n, out_h, out_w, kh, kw, c), np.float32)
    for i in range(out_h):
        for j in range(out_w):
            for di in range(kh):
                for dj in range(kw):
                    r, s = i * stride - top + di, j * stride - left + dj
                    if 0 <= r < h and 0 <= s < wd:
                        out[:, i, j, di, dj] = x[:, r, s]
    return out.reshape(n, out_h, out_w, -1)


@pytest.mark.parametrize("padding, stride", [("SAME", 1), ("VALID", 1), ("SAME", 2), ("VALID", 2)])
def test_conv_forward_is_dense_on_patches(padding, stride):
    """A real 0 quantises to z_a: the conv equals Dense on patches padded with 0, under the input's range."""
    mode = ir.integer_mode(f"uint8:{LUTS / 'mul8u_2AC.int8u.npy'}")  # T[0, w] != 0: padding taps do count
    rng = np.random.default_rng(4)
    x = rng.normal(0.5, 1.0, (2, 6, 5, 3)).astype(np.float32)
    w = rng.normal(0.0, 0.3, (3, 3, 3, 4)).astype(np.float32)
    y = ir.conv2d_forward(x, w, mode, strides=stride, padding=padding)
    patches = float_patches(x, 3, 3, stride, padding)
    dense = ir.dense_forward(patches.reshape(-1, 27), w.reshape(27, 4), mode, activation_range=ir.tensor_range(x))
    assert np.array_equal(bits(y), bits(dense.reshape(y.shape)))


# ------------------------------------------------------------------------------------------------------- backward


def dequantised(values, space, per_channel):
    """x' by numpy's float32 arithmetic: fl32((q - z) x s)."""
    lo, hi = ir.tensor_range(values, per_channel)
    s, z = ir.scales_from_range(lo, hi, space)
    q = ir.quantise(values, s, z, space)
    return (q - z).astype(np.float32) * s, ir.in_range(values, s, z, space)


def test_dense_backward_is_the_straight_through_estimator():
    mode = ir.integer_mode(f"int8:{LUTS / 'mul8s_1L2H.int8s.npy'}")
    space = ir.code_space(mode)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 6)).astype(np.float32)
    w = rng.normal(0, 0.3, (6, 3)).astype(np.float32)
    dy = rng.normal(size=(4, 3)).astype(np.float32)
    activation_range = (np.float32(-1.0), np.float32(1.0))  # a running range that clips some of x
    dx, dw = ir.dense_backward(x, w, dy, mode, activation_range=activation_range)
    s_a, z_a = ir.scales_from_range(*activation_range, space)
    x_hat = (ir.quantise(x, s_a, z_a, space) - z_a).astype(np.float32) * s_a
    mask_x = ir.in_range(x, s_a, z_a, space)
    w_hat, mask_w = dequantised(w, space, per_channel=True)
    assert not mask_x.all() and mask_x.any()
    expected_dx = np.array([[sum(float(dy[i, c] * w_hat[k, c]) for c in range(3)) for k in range(6)]
                            for i in range(4)])
    expected_dw = np.array([[sum(float(x_hat[i, k] * dy[i, c]) for i in range(4)) for c in range(3)]
                            for k in range(6)])
    assert np.array_equal(dx, np.where(mask_x, expected_dx, 0.0))
    assert np.array_equal(dw, np.where(mask_w, expected_dw, 0.0))


def test_conv_backward_is_the_straight_through_estimator():
    mode = ir.integer_mode(f"uint8:{LUTS / 'mul8u_2AC.int8u.npy'}")
    space = ir.code_space(mode)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(1, 4, 4, 2)).astype(np.float32)
    w = rng.normal(0, 0.3, (3, 3, 2, 2)).astype(np.float32)
    dy = rng.normal(size=(1, 4, 4, 2)).astype(np.float32)
    dx, dw = ir.conv2d_backward(x, w, dy, mode, padding="SAME")
    x_hat, mask_x = dequantised(x, space, per_channel=False)
    w_hat, mask_w = dequantised(w, space, per_channel=True)
    expected_dx = np.zeros(x.shape)
    expected_dw = np.zeros(w.shape)
    for i in range(4):
        for j in range(4):
            for di in range(3):
                for dj in range(3):
                    r, s = i - 1 + di, j - 1 + dj
                    if 0 <= r < 4 and 0 <= s < 4:
                        for ci in range(2):
                            for co in range(2):
                                expected_dx[0, r, s, ci] += float(dy[0, i, j, co] * w_hat[di, dj, ci, co])
                                expected_dw[di, dj, ci, co] += float(x_hat[0, r, s, ci] * dy[0, i, j, co])
    np.testing.assert_allclose(dx, np.where(mask_x, expected_dx, 0.0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, np.where(mask_w, expected_dw, 0.0), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, stride, padding", [("int8:mul8s_1L2H.int8s.npy", 2, "SAME"),
                                                   ("int8:mul8s_1KR3.int8s.npy", 1, "VALID"),
                                                   ("int8", 2, "VALID"),
                                                   ("uint8:mul8u_2AC.int8u.npy", 2, "SAME"),
                                                   ("int8_asym:mul8s_1L2H.int8s.npy", 1, "VALID"),
                                                   ("uint8", 2, "VALID")])
def test_table_backward_is_the_spec_sum_tap_by_tap(name, stride, padding):
    """The gradients through the table, written out tap by tap from the spec: each product of dw T[a, d] - z_dy a -
    z_a d + z_a z_dy (x's codes, padding taps z_a, against dy's), each of dx T[e, w] - z_w[co] e - z_g w + z_g
    z_w[co], co the tap's channel, e the code of g = fl32(dy x s_w[co]) at the tap, z_g where the tap falls between
    dy's strides or outside it. Symmetric schemes have one zero point for all; asymmetric ones their ranges' and w's
    per channel. With the exact tables, near the straight-through gradients."""
    kind, _, table = name.partition(":")
    mode = ir.integer_mode(f"{kind}:{LUTS / table}" if table else kind)
    space = ir.code_space(mode)
    rng = np.random.default_rng(9)
    x = (rng.normal(size=(2, 5, 6, 2)) + 0.7).astype(np.float32)
    w = rng.normal(0.1, 0.3, (3, 3, 2, 3)).astype(np.float32)
    out_h, top = ir.reference.output_size(5, 3, stride, 1, padding)
    out_w, left = ir.reference.output_size(6, 3, stride, 1, padding)
    dy = (rng.normal(size=(2, out_h, out_w, 3)) - 0.3).astype(np.float32)
    activation_range = (np.float32(-0.6), np.float32(2.2))  # clips some of x at both ends
    dx, dw = ir.conv2d_table_backward(x, w, dy, mode, strides=stride, padding=padding,
                                      activation_range=activation_range)
    q = ir.quantise_operands(x, w, space, activation_range)
    t = mode.table.astype(np.int64)
    s_dy, z_dy = ir.scales_from_range(*ir.tensor_range(dy), space)
    d = ir.quantise(dy, s_dy, z_dy, space)
    g = ir.fl32(dy.astype(np.float64) * q.scale_w.astype(np.float64))
    s_g, z_g = ir.scales_from_range(*ir.tensor_range(g), space)
    e_codes = ir.quantise(g, s_g, z_g, space)
    z_a, z_w, z_dy, z_g = int(q.zero_a), q.zero_w.astype(np.int64), int(z_dy), int(z_g)
    if space.scheme == "asymmetric":  # the asymmetric terms are exercised
        assert z_a not in (0, 128) and len(set(z_w.tolist())) > 1
    acc_dw = np.zeros(w.shape, np.int64)
    acc_dx = np.zeros(x.shape, np.int64)
    for n in range(2):
        for i in range(out_h):
            for j in range(out_w):
                for kh in range(3):
                    for kw in range(3):
                        r, c = i * stride - top + kh, j * stride - left + kw
                        inside = 0 <= r < 5 and 0 <= c < 6
                        for ci in range(2):
                            a = int(q.codes_a[n, r, c, ci]) if inside else z_a
                            for co in range(3):
                                dd = int(d[n, i, j, co])
                                acc_dw[kh, kw, ci, co] += t[a & 255, dd & 255] - z_dy * a - z_a * dd + z_a * z_dy
    for n in range(2):
        for r in range(5):
            for c in range(6):
                for kh in range(3):
                    for kw in range(3):
                        i, j = r + top - kh, c + left - kw
                        on_dy = i % stride == 0 and j % stride == 0 and 0 <= i // stride < out_h \
                            and 0 <= j // stride < out_w
                        for co in range(3):
                            e = int(e_codes[n, i // stride, j // stride, co]) if on_dy else z_g
                            for ci in range(2):
                                wc = int(q.codes_w[kh, kw, ci, co])
                                acc_dx[n, r, c, ci] += t[e & 255, wc & 255] - z_w[co] * e - z_g * wc + z_g * z_w[co]
    want_dw = ir.rescale(acc_dw.reshape(-1, 3), q.scale_a, np.full(3, s_dy, np.float32)).reshape(w.shape)
    want_dx = ir.rescale(acc_dx.reshape(-1, 2), s_g, np.ones(2, np.float32)).reshape(x.shape)
    mask_x, mask_w = ir.in_range(x, q.scale_a, q.zero_a, space), ir.in_range(w, q.scale_w, q.zero_w, space)
    assert not mask_x.all() and np.abs(want_dx).max() > 0.1 and np.abs(want_dw).max() > 0.1
    assert np.array_equal(dx, np.where(mask_x, want_dx, 0).astype(np.float32))
    assert np.array_equal(dw, np.where(mask_w, want_dw, 0).astype(np.float32))
    if not table:  # the exact tables: near the straight-through gradients (the codes' rounding of dy and g)
        ste_dx, ste_dw = ir.conv2d_backward(x, w, dy, mode, strides=stride, padding=padding,
                                            activation_range=activation_range)
        for got, want in ((dx, ste_dx), (dw, ste_dw)):
            assert np.abs(got - want).max() < 0.03 * np.abs(want).max()


def test_table_backward_handles_non_finite():
    mode = ir.integer_mode("uint8_sym")
    rng = np.random.default_rng(8)
    x, w, dy = rng.normal(size=(3, 4)), rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    dx, dw = ir.dense_table_backward(x, w, dy, mode)
    ste_dx, ste_dw = ir.dense_backward(x, w, dy, mode)
    assert np.abs(dx - ste_dx).max() < 0.03 * np.abs(ste_dx).max()
    dy[1, 1] = np.inf
    dx, dw = ir.dense_table_backward(x, w, dy, mode)
    assert np.isnan(dx).all() and np.isnan(dw).all(), "a non-finite dy makes both gradients NaN"
    x[0, 0] = np.nan
    dx, dw = ir.dense_table_backward(x, w, rng.normal(size=(3, 2)), mode)
    assert np.isnan(dw).all() and dx[0, 0] == 0 and not np.isnan(dx).any(), "x's NaN: dw NaN, dx masked there"
