"""Tests of ApproxTrain-format tables (ops/modes/table_files.py and table_make.py): generation equal to ApproxTrain's
files, I/O, errors, m < 7."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from ops.modes import reference, table_files, table_make
from ops.modes.multipliers import MODES

SHIPPED = [("am16", "MBM_7.bin"), ("mit16", "MIT_7.bin"), ("acc16", "ACC_7.bin")]


def random_table(m: int, seed: int) -> np.ndarray:
    """A valid m-bit table of random entries: any carry, any m-bit mantissa."""
    rng = np.random.default_rng(seed)
    size = 2**m
    return ((rng.integers(0, 2, (size, size)) << 7) | rng.integers(0, size, (size, size))).astype(np.uint8)


@pytest.mark.parametrize("mode, file", SHIPPED)
def test_make_table_equals_approxtrain_byte_for_byte(mode, file, lut_dir):
    shipped = (lut_dir / file).read_bytes()
    made = table_make.make_table(mode)
    assert made.dtype == np.uint8 and made.shape == (128, 128)
    assert made.tobytes() == shipped
    assert np.array_equal(table_files.read_table(lut_dir / file), made)


def recorded_tables(readme: Path) -> dict[str, tuple[int, str]]:
    """file -> (bytes, sha256) from the rows of tests/data/README.md's table of approxtrain-luts/."""
    rows = re.findall(r"^\| (\w+\.bin) \| (\d+) \| [^|]+ \| ([0-9a-f]{64}) \|$", readme.read_text(), re.MULTILINE)
    return {file: (int(size), sha256) for file, size, sha256 in rows}


def test_shipped_tables_are_the_recorded_ones(lut_dir):
    # tests/data/README.md records each file's provenance and sha256: a changed test vector would make the test
    # above meaningless, and a table added without its provenance would be unexplained.
    recorded = recorded_tables(lut_dir.parent / "README.md")
    assert sorted(recorded) == sorted(file for _, file in SHIPPED)
    assert sorted(path.name for path in lut_dir.iterdir()) == sorted(recorded)
    for file, (size, sha256) in recorded.items():
        data = (lut_dir / file).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (size, sha256), file


def test_make_table_family_decides_and_m_is_free():
    assert np.array_equal(table_make.make_table("am32", 7), table_make.make_table("am16"))
    assert np.array_equal(table_make.make_table("mit32", 7), table_make.make_table("mit16"))
    for m in range(1, 8):
        for mode in ("am16", "mit16", "acc16"):
            table = table_make.make_table(mode, m)
            assert table.shape == (2**m, 2**m) and ((table & 0x7F) < 2**m).all()


def test_small_tables_from_the_definitions():
    # m = 1: fields 0 and 1, i.e. 1.0 and 1.5.
    # Mitchell: 1+0+0 = 1 (M 0); 1+0.5 (M 1); 1.5x1.5 -> 2 x (1 + 0) with carry.
    assert table_make.make_table("mit16", 1).tolist() == [[0x00, 0x01], [0x01, 0x80]]
    # bf16 family at m = 1: 1x1 = 1; 1x1.5 = 1.5; 1.5x1.5 = 2.25 -> 2 x 1.125, truncated to 2 x 1.0.
    assert table_make.make_table("acc16", 1).tolist() == [[0x00, 0x01], [0x01, 0x80]]
    # MBM at m <= 3: C = 0, so it is Mitchell on fields forced odd. At m = 1 every field becomes 1: always 2.0.
    assert table_make.make_table("am16", 1).tolist() == [[0x80, 0x80], [0x80, 0x80]]
    for m in (2, 3):
        fields = np.arange(2**m) | 1
        forced = table_make.make_table("mit16", m)[fields[:, None], fields[None, :]]
        assert np.array_equal(table_make.make_table("am16", m), forced)
    # m = 5: C = 2 below the carry, 1 above it. Fa = Fb = 0 -> 1 + 1 + 2 = 4; Fa = Fb = 16 -> 17 + 17 - 32 + 1.
    table5 = table_make.make_table("am16", 5)
    assert table5[0, 0] == 4 and table5[16, 16] == 0x80 | 3


def test_make_table_errors():
    for name in ("native", "acc32", "fp16"):
        with pytest.raises(ValueError) as err:
            table_make.make_table(name)
        assert f"'{name}'" in str(err.value)
        for tabulable in [mode.name for mode in MODES if mode.family in table_make.TABLE_FAMILIES]:
            assert tabulable in str(err.value)
    for m in (0, 8):
        with pytest.raises(ValueError, match=f"m = {m} .*1..7"):
            table_make.make_table("am16", m)


def test_write_table_round_trips(tmp_path, lut_dir):
    path = table_make.write_table("mit16", tmp_path / "sub" / "MIT.bin")
    assert path.read_bytes() == (lut_dir / "MIT_7.bin").read_bytes()
    for m in range(1, 8):
        table = random_table(m, seed=m)
        path = table_make.write_table(table, tmp_path / f"t{m}.bin")
        assert path.stat().st_size == 4**m
        assert np.array_equal(table_files.read_table(path), table)
    table_make.write_table(random_table(7, 0), tmp_path / "t1.bin")  # replaces a file of another size
    assert table_files.read_table(tmp_path / "t1.bin").shape == (128, 128)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"] + [f"t{m}.bin" for m in range(1, 8)]  # no temps


def test_write_table_rejects_bad_tables(tmp_path):
    with pytest.raises(ValueError, match=r"shape \(3, 3\).*\(2, 2\), \(4, 4\)"):
        table_make.write_table(np.zeros((3, 3), np.uint8), tmp_path / "x.bin")
    with pytest.raises(ValueError, match="entry 1 .*mantissa 2 does not fit in m = 1"):
        table_make.write_table(np.array([[0, 2], [0, 0]], np.uint8), tmp_path / "x.bin")
    assert not any(tmp_path.iterdir())


def test_read_table_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"'.*nope\.bin' does not exist"):
        table_files.read_table(tmp_path / "nope.bin")
    with pytest.raises(ValueError, match="cannot be read"):
        table_files.read_table(tmp_path)  # a folder
    wrong = tmp_path / "wrong.bin"
    wrong.write_bytes(bytes(16385))
    with pytest.raises(ValueError) as err:
        table_files.read_table(wrong)
    assert "wrong.bin" in str(err.value) and "16385 bytes" in str(err.value)
    assert "4, 16, 64, 256, 1024, 4096, 16384" in str(err.value)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(bytes([0x00, 0x01, 0x82, 0x00]))  # m = 1: entry 2 has M = 2
    with pytest.raises(ValueError) as err:
        table_files.read_table(bad)
    assert "bad.bin" in str(err.value) and "entry 2" in str(err.value) and "130 = 0x82" in str(err.value)


def test_canonical7_expands_by_the_rule():
    table = np.array([[0x00, 0x01], [0x81, 0x80]], np.uint8)  # m = 1
    wide = table_files.canonical7(table)
    assert wide.shape == (128, 128) and wide.dtype == np.uint8
    assert wide[0, 0] == 0 and wide[63, 64] == 0x40 and wide[64, 0] == 0xC0 and wide[127, 127] == 0x80
    seven = table_make.make_table("am16")
    assert np.array_equal(table_files.canonical7(seven), seven)
    with pytest.raises(ValueError, match="shape"):
        table_files.canonical7(np.zeros((5, 5), np.uint8))


@pytest.mark.parametrize("m", [1, 3, 5, 6])
def test_canonical7_gives_the_same_products(m, tmp_path, random_operands, same_bits):
    # What the kernels rely on: indexing the canonical m = 7 table with 7 bits equals the m-bit table with m bits.
    table = random_table(m, seed=10 + m)
    small = table_make.write_table(table, tmp_path / "small.bin")
    wide = table_make.write_table(table_files.canonical7(table), tmp_path / "wide.bin")
    a, b = random_operands(100_000, seed=20 + m), random_operands(100_000, seed=40 + m)
    assert same_bits(reference.product(a, b, f"lut:{small}"), reference.product(a, b, f"lut:{wide}")).all()


def test_table_mode_at_m5_equals_mbm_on_5_bits(tmp_path, random_operands, same_bits):
    # A table made at m = 5 computes the MBM definition with m = 5 (C = 2 or 1) on every operand.
    path = table_make.write_table(table_make.make_table("am16", 5), tmp_path / "mbm5.bin")
    a, b = random_operands(50_000, seed=60), random_operands(50_000, seed=61)
    got = reference.product(a, b, f"lut:{path}")
    fa = (a.view(np.uint32) & 0x7FFFFF) >> 18
    fb = (b.view(np.uint32) & 0x7FFFFF) >> 18
    carry, mantissa = reference.mantissa_product(fa, fb, "mbm", 5)
    exponent = ((a.view(np.uint32) >> 23) & 0xFF).astype(np.int64) + ((b.view(np.uint32) >> 23) & 0xFF) - 127 + carry
    normal = (exponent > 0) & (exponent < 255) & (np.abs(a) >= 2**-126) & (np.abs(b) >= 2**-126)
    normal &= np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore"):  # inf and NaN operands, excluded by `normal`
        expected = np.ldexp(1 + mantissa / 32, (exponent - 127).astype(np.int32)) * np.sign(a) * np.sign(b)
    assert normal.sum() > 10_000
    assert same_bits(got[normal], expected[normal].astype(np.float32)).all()
