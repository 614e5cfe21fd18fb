"""Tests of the mode registry (ops/modes/multipliers.py) and the numpy references (ops/modes/reference.py) against the
specification, docs/multipliers-spec.md (its worked examples and error columns are read from it: spec_tables.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ops.modes import multipliers, reference
from ops.modes.multipliers import parse

from tests.ops.spec_tables import error_table, worked_examples

ONE23, HALF23 = 1 << 23, 1 << 22


def fp32(biased_exponent: int, field: int, negative: bool = False) -> np.float32:
    """The float32 with these bits: the way the spec writes an operand."""
    bits = (int(negative) << 31) | (biased_exponent << 23) | field
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def bits_of(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


# ------------------------------------------------------------------------------------------------------ registry


def test_names_are_the_registry_in_order():
    assert multipliers.names() == ["native", "acc32", "acc16", "fp16", "am32", "am16", "mit32", "mit16"]
    assert multipliers.names(include_native=False) == ["acc32", "acc16", "fp16", "am32", "am16", "mit32", "mit16"]


@pytest.mark.parametrize(
    "name, family, bits",
    [("native", "native", None), ("acc32", "ieee32", 23), ("acc16", "bf16", 7), ("fp16", "ieee16", 10),
     ("am32", "mbm", 23), ("am16", "mbm", 7), ("mit32", "mitchell", 23), ("mit16", "mitchell", 7)],
)
def test_parse_named_modes(name, family, bits):
    mode = parse(name)
    assert (mode.name, mode.family, mode.mantissa_bits, mode.table, mode.path) == (name, family, bits, None, None)
    assert mode.description and "\n" not in mode.description
    assert parse(mode) is mode


def test_parse_unknown_name_lists_every_choice():
    with pytest.raises(ValueError) as err:
        parse("am8")
    message = str(err.value)
    assert "'am8'" in message
    for name in multipliers.names():
        assert name in message
    assert "lut:<file>" in message


def test_parse_lut_reads_the_table_once_per_version(tmp_path, lut_dir):
    path = tmp_path / "t.bin"
    path.write_bytes((lut_dir / "MBM_7.bin").read_bytes())
    first = parse(f"lut:{path}")
    assert (first.family, first.mantissa_bits, first.path) == ("table", 7, path.resolve())
    assert first.table.shape == (128, 128) and not first.table.flags.writeable
    assert parse(f"lut:{path}") is first  # cached: same file, same mtime and size
    path.write_bytes((lut_dir / "MIT_7.bin").read_bytes())
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a new version even on a coarse clock
    second = parse(f"lut:{path}")
    assert second is not first
    assert np.array_equal(second.table, np.fromfile(lut_dir / "MIT_7.bin", np.uint8).reshape(128, 128))


def test_parse_lut_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        parse(f"lut:{tmp_path / 'missing.bin'}")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes(100))
    with pytest.raises(ValueError) as err:
        parse(f"lut:{bad}")
    assert "bad.bin" in str(err.value) and "100 bytes" in str(err.value)
    assert "4, 16, 64, 256, 1024, 4096, 16384" in str(err.value)
    with pytest.raises(ValueError, match="names no table file"):
        parse("lut:")


def test_native_is_not_a_product_mode():
    with pytest.raises(ValueError, match="'native' is not a product mode.*acc32"):
        reference.product(1.0, 1.0, "native")


# ------------------------------------------------------------------------------------------ hand-computed products

# (a, b, mode, expected, how): the spec's worked examples, computed by hand from its rules.
HAND_CASES = worked_examples()


@pytest.mark.parametrize("a, b, mode, expected, how", HAND_CASES,
                         ids=[f"{case[2]}-{i}" for i, case in enumerate(HAND_CASES)])
def test_hand_computed_products(a, b, mode, expected, how, same_bits):
    got = reference.product(np.float32(a), np.float32(b), mode)
    assert got.dtype == np.float32
    assert same_bits(got, np.float32(expected)), f"{mode}: {a!r} x {b!r} = {got!r}, expected {expected!r} ({how})"
    # The mantissa product is symmetric for the closed-form modes: the swapped pair gives the same bits.
    assert same_bits(reference.product(np.float32(b), np.float32(a), mode), got)


SUBNORMAL, NEG_SUBNORMAL = fp32(0, 12345), fp32(0, 1, negative=True)
COMMON_RULE_CASES = [  # (a, b, expected) for every mode with the common rules (all but fp16)
    (np.inf, 0.0, np.nan),  # rule 1 before rule 2
    (-np.inf, -0.0, np.nan),
    (np.inf, SUBNORMAL, np.inf),  # a subnormal is not zero for rule 1
    (np.inf, NEG_SUBNORMAL, -np.inf),
    (-np.inf, NEG_SUBNORMAL, np.inf),
    (np.inf, -1.5, -np.inf),
    (np.inf, np.inf, np.inf),
    (np.inf, -np.inf, -np.inf),
    (np.nan, 0.0, np.nan),
    (np.nan, np.inf, np.nan),
    (1.0, np.nan, np.nan),
    (0.0, 3.0, 0.0),  # rule 2
    (-0.0, 3.0, -0.0),
    (SUBNORMAL, 3.0e30, 0.0),  # a subnormal operand counts as zero whatever the other
    (fp32(0, ONE23 - 1), fp32(254, ONE23 - 1), 0.0),
]


@pytest.mark.parametrize("mode", [name for name in multipliers.names(include_native=False) if name != "fp16"])
@pytest.mark.parametrize("a, b, expected", COMMON_RULE_CASES)
def test_common_rules(a, b, expected, mode, same_bits):
    got = reference.product(np.float32(a), np.float32(b), mode)
    assert same_bits(got, np.float32(expected)), f"{mode}: {a!r} x {b!r} = {got!r}, expected {expected!r}"
    if expected == 0:  # rule 4 allows either zero, the reference gives the sign of the product
        assert np.signbit(got) == (np.signbit(np.float32(a)) != np.signbit(np.float32(b)))


def test_fp16_inf_times_fp32_subnormal_is_nan():
    # fp16 has no common rules: the subnormal rounds to an fp16 zero before the multiply.
    assert np.isnan(reference.product(np.float32(np.inf), SUBNORMAL, "fp16"))


# ---------------------------------------------------------------------------------------- sweeps over many operands


def _sweep_pairs(random_operands, special_operands):
    """>= 10**5 random pairs over every exponent, then every pair of the special operands (~2.3 * 10**5)."""
    a = np.concatenate([random_operands(120_000, seed=1), np.repeat(special_operands, special_operands.size)])
    b = np.concatenate([random_operands(120_000, seed=2), np.tile(special_operands, special_operands.size)])
    return a, b


@pytest.mark.parametrize("mode, table", [("am16", "MBM_7.bin"), ("mit16", "MIT_7.bin"), ("acc16", "ACC_7.bin")])
def test_table_modes_equal_closed_form_modes(mode, table, lut_dir, random_operands, special_operands):
    a, b = _sweep_pairs(random_operands, special_operands)
    closed = reference.product(a, b, mode)
    tabled = reference.product(a, b, f"lut:{lut_dir / table}")
    nan = np.isnan(closed)
    assert np.array_equal(nan, np.isnan(tabled))
    mismatch = np.flatnonzero((bits_of(closed) != bits_of(tabled)) & ~nan)
    assert mismatch.size == 0, f"{mismatch.size} products differ, first {a[mismatch[0]]!r} x {b[mismatch[0]]!r}"


def test_acc32_equals_ieee_product_with_flush(random_operands, special_operands, same_bits):
    # numpy's float64 product of two fp32 values is exact (48 <= 53 bits); its cast to float32 is IEEE RNE with
    # gradual underflow; the flush then removes subnormal results. Exponents 40..90 put most products near 2**-126.
    rng = np.random.default_rng(3)
    near = lambda n: (rng.integers(40, 90, n) << 23 | rng.integers(0, ONE23, n)).astype(np.uint32).view(np.float32)
    a = np.concatenate([random_operands(50_000, seed=4), near(100_000), np.repeat(special_operands, 40)])
    b = np.concatenate([random_operands(50_000, seed=5), near(100_000),
                        np.tile(special_operands[:40], len(special_operands))])
    with np.errstate(all="ignore"):
        ieee = (a.astype(np.float64) * b.astype(np.float64)).astype(np.float32)
    expected = np.where((np.abs(ieee) < np.float32(2**-126)) | (np.abs(a) < 2**-126) | (np.abs(b) < 2**-126),
                        np.float32(0), ieee)
    special = ~np.isfinite(a) | ~np.isfinite(b)
    with np.errstate(all="ignore"):
        expected = np.where(special, a * b, expected).astype(np.float32)
    # inf x subnormal: numpy (no denormals-are-zero here) gives the IEEE inf
    got = reference.product(a, b, "acc32")
    assert same_bits(got, expected).all()
    assert (np.abs(got[np.isfinite(got) & (got != 0)]) >= 2**-126).all()


def test_fp16_equals_binary16_roundings(random_operands):
    a, b = random_operands(100_000, seed=6), random_operands(100_000, seed=7)
    # Scale exponents 0..255 to -100..155 around binary16's range (2**-24 .. 65504): underflow, range, overflow.
    with np.errstate(invalid="ignore"):  # the signalling NaN among the operands
        a, b = a * np.float32(2.0**-100), b * np.float32(2.0**-100)
    got = reference.product(a, b, "fp16")
    with np.errstate(all="ignore"):
        exact = a.astype(np.float16).astype(np.float64) * b.astype(np.float16).astype(np.float64)
        expected = exact.astype(np.float16).astype(np.float32)  # float64 -> float16 directly: one rounding
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    finite = ~np.isnan(got)
    assert np.array_equal(bits_of(got)[finite] & 0x7FFFFFFF, bits_of(expected)[finite] & 0x7FFFFFFF)
    assert np.array_equal(got.astype(np.float16).astype(np.float32)[finite], got[finite])  # binary16 values


def test_broadcasting_and_dtype():
    a = np.arange(1, 4, dtype=np.float32)[:, None]
    b = np.arange(1, 5, dtype=np.float32)[None, :]
    got = reference.product(a, b, "acc32")
    assert got.shape == (3, 4) and got.dtype == np.float32
    assert np.array_equal(got, a * b)
    scalar = reference.product(3.0, 3.0, "mit32")  # 1.5 x 1.5 at exponent 1: 2 (0.5 + 0.5) x 4
    assert scalar.shape == () and scalar == np.float32(8.0)


def test_mantissa_product_errors():
    with pytest.raises(ValueError, match="no family 'table'"):
        reference.mantissa_product(0, 0, "table", 7)
    with pytest.raises(ValueError, match="1..23"):
        reference.mantissa_product(0, 0, "mbm", 24)
    with pytest.raises(ValueError, match=r"0\.\.127 for m = 7"):
        reference.mantissa_product(128, 0, "mitchell", 7)


# ----------------------------------------------------------------------------------------- error of one product

# (mode, mean |relative error|, bias = mean relative error, every error <= 0) from the spec's table of modes;
# on 2 * 10**5 normal operands the sample means sit within ~0.02 % of the 10**6-operand values in docs/.
ERROR_TABLE = error_table()


def test_the_error_table_covers_every_product_mode():
    assert [mode for mode, *_ in ERROR_TABLE] == multipliers.names(include_native=False)


@pytest.mark.parametrize("mode, mean_error, bias, never_high", ERROR_TABLE)
def test_error_of_one_product_matches_the_table(mode, mean_error, bias, never_high, normal_operands):
    a, b = normal_operands(200_000, seed=8), normal_operands(200_000, seed=9)
    exact = a.astype(np.float64) * b.astype(np.float64)
    relative = (reference.product(a, b, mode).astype(np.float64) - exact) / exact
    assert abs(np.abs(relative).mean() - mean_error) <= max(0.05 * mean_error, 1e-7)
    assert abs(relative.mean() - bias) <= max(0.1 * abs(bias), 2e-4 if mean_error else 1e-8)
    if never_high:
        assert (relative <= 0).all()
    if mode == "mit32":  # the worst case of Mitchell: 1 + xa + xb vs (1 + xa)(1 + xb) at xa = xb = 0.5: 1/9
        assert relative.min() >= -1 / 9 - 1e-6 and relative.min() < -0.110


# ---------------------------------------------------------------------------------------------- layer references


def test_matmul_is_the_sum_of_single_products(monkeypatch):
    rng = np.random.default_rng(10)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((7, 3)).astype(np.float32)
    expected = np.array([[sum(float(reference.product(a[i, k], b[k, j], "am16")) for k in range(7))
                          for j in range(3)] for i in range(5)])
    assert np.allclose(reference.matmul(a, b, "am16"), expected, rtol=1e-12, atol=0)
    monkeypatch.setattr(reference, "_MATMUL_BLOCK", 8)  # force row and column chunks
    assert np.allclose(reference.matmul(a, b, "am16"), expected, rtol=1e-12, atol=0)
    with pytest.raises(ValueError, match=r"\[M, K\] x \[K, N\]"):
        reference.matmul(a, a, "am16")


@pytest.fixture
def left_table(tmp_path):
    """A table whose product ignores Fb: M = Fa, c = 0. Its products show which operand is the left one."""
    table = np.repeat(np.arange(128, dtype=np.uint8)[:, None], 128, axis=1)
    path = tmp_path / "left.bin"
    table.tofile(path)
    return f"lut:{path}"


def _truncate7(x):
    return (bits_of(x) & np.uint32(0xFFFF0000)).view(np.float32)


def _power_of_two(x):
    return (bits_of(x) & np.uint32(0xFF800000)).view(np.float32)


CONV_CASES = [  # (input shape NHWC, filter HWIO, strides, padding, dilations): odd and even sizes, TF's SAME split
    ((2, 7, 6, 3), (3, 3, 3, 4), 1, "SAME", 1),
    ((1, 8, 8, 2), (3, 2, 2, 3), (2, 2), "SAME", 1),
    ((1, 9, 7, 2), (2, 3, 2, 2), (2, 3), "VALID", 1),
    ((1, 9, 9, 2), (3, 3, 2, 2), 1, "SAME", (2, 2)),
    ((1, 6, 5, 1), (4, 4, 1, 2), [1, 3, 2, 1], "SAME", 1),
]


@pytest.mark.parametrize("x_shape, w_shape, strides, padding, dilations", CONV_CASES)
def test_conv2d_references_match_tensorflow(x_shape, w_shape, strides, padding, dilations):
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(11)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    y = reference.conv2d(x, w, strides, padding, dilations, "acc32")
    s, d = reference._pair(strides, "strides"), reference._pair(dilations, "dilations")
    # TF's CPU gradients refuse dilation > 1: use the equivalent undilated filter with zeros between the taps.
    w_dilated = np.zeros(((w.shape[0] - 1) * d[0] + 1, (w.shape[1] - 1) * d[1] + 1, *w.shape[2:]), np.float64)
    w_dilated[::d[0], ::d[1]] = w
    args = dict(strides=[1, *s, 1], padding=padding)
    y_tf = tf.nn.conv2d(x.astype(np.float64), w_dilated, **args).numpy()
    assert y.shape == y_tf.shape
    assert np.allclose(y, y_tf, rtol=1e-6, atol=1e-6)  # acc32 rounds each product to fp32: ~1e-7 relative
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = reference.conv2d_backprop_input(x.shape, w, dy, strides, padding, dilations, "acc32")
    dx_tf = tf.raw_ops.Conv2DBackpropInput(input_sizes=x.shape, filter=w_dilated,
                                           out_backprop=dy.astype(np.float64), **args).numpy()
    assert np.allclose(dx, dx_tf, rtol=1e-6, atol=1e-6)
    dw = reference.conv2d_backprop_filter(x, w.shape, dy, strides, padding, dilations, "acc32")
    dw_tf = tf.raw_ops.Conv2DBackpropFilter(input=x.astype(np.float64), filter_sizes=w_dilated.shape,
                                            out_backprop=dy.astype(np.float64), **args).numpy()
    assert np.allclose(dw, dw_tf[::d[0], ::d[1]], rtol=1e-6, atol=1e-6)


def test_layer_references_put_the_left_operand_first(left_table):
    # With M = Fa the product is trunc7(left) x 2**exponent(right): exact in fp32, so the layer equals its acc32
    # reference on those operands. The operand order: x (*) w, dy (*) w^T, x^T (*) dy.
    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)
    dy = rng.standard_normal((1, 3, 3, 3)).astype(np.float32)
    args = (2, "SAME", 1)
    assert np.array_equal(reference.conv2d(x, w, *args, left_table),
                          reference.conv2d(_truncate7(x), _power_of_two(w), *args, "acc32"))
    assert np.array_equal(reference.conv2d_backprop_input(x.shape, w, dy, *args, left_table),
                          reference.conv2d_backprop_input(x.shape, _power_of_two(w), _truncate7(dy), *args, "acc32"))
    assert np.array_equal(reference.conv2d_backprop_filter(x, w.shape, dy, *args, left_table),
                          reference.conv2d_backprop_filter(_truncate7(x), w.shape, _power_of_two(dy), *args, "acc32"))
    a, b = rng.standard_normal((5, 10)).astype(np.float32), rng.standard_normal((10, 3)).astype(np.float32)
    assert np.array_equal(reference.matmul(a, b, left_table),
                          reference.matmul(_truncate7(a), _power_of_two(b), "acc32"))


def test_padding_taps_are_not_multiplied():
    # An inf weight meets only real inputs: a padded zero would give inf x 0 = NaN.
    x = np.ones((1, 3, 3, 1), np.float32)
    w = np.full((3, 3, 1, 1), np.inf, np.float32)
    y = reference.conv2d(x, w, 1, "SAME", 1, "am16")
    assert np.isinf(y).all() and not np.isnan(y).any()


def test_conv2d_argument_errors():
    x = np.zeros((1, 4, 4, 2), np.float32)
    with pytest.raises(ValueError, match="2 channels but the filter expects 3"):
        reference.conv2d(x, np.zeros((3, 3, 3, 1), np.float32), 1, "SAME", 1, "acc32")
    with pytest.raises(ValueError, match="'SAME' or 'VALID'"):
        reference.conv2d(x, np.zeros((3, 3, 2, 1), np.float32), 1, "same", 1, "acc32")
    with pytest.raises(ValueError, match="strides must be"):
        reference.conv2d(x, np.zeros((3, 3, 2, 1), np.float32), (1, 2, 3), "SAME", 1, "acc32")
    with pytest.raises(ValueError, match=r"dy has shape \(1, 4, 4, 1\).*\(1, 2, 2, 1\)"):
        reference.conv2d_backprop_input(x.shape, np.zeros((3, 3, 2, 1), np.float32), np.zeros((1, 4, 4, 1)), 2)
