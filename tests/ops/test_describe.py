"""`python -m ops.describe`: the statistics it prints are those of docs/multipliers.md, its error map is the relative
error of every mantissa pair computed from the definition's mantissa products, and its histogram holds every
sampled product. Run in this process on the numpy reference (no TensorFlow)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ops
from ops.modes import describe, error_stats
from ops.modes.reference import mantissa_product


def from_definition(family: str, m: int) -> np.ndarray:
    """(1 + c)(1 + M / 2**m) / ((1 + Fa / 2**m)(1 + Fb / 2**m)) - 1 over every (Fa, Fb): the relative error of a
    mantissa-product mode, from ops.modes.reference.mantissa_product alone (not from product(), which describe uses)."""
    side = 1 << m
    fa, fb = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    carry, mantissa = mantissa_product(fa, fb, family, m)
    approx = (1.0 + carry) * (1.0 + mantissa / side)
    return approx / ((1.0 + fa / side) * (1.0 + fb / side)) - 1.0


def test_am16_map_and_summary_equal_the_reference_statistics(tmp_path, capsys):
    assert describe.main(["am16", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((tmp_path / "am16-summary.json").read_text())
    with np.load(tmp_path / "am16-errors.npz") as data:
        grid = data["relative_error"]
    expected = from_definition("mbm", 7)
    assert grid.shape == (128, 128)
    np.testing.assert_allclose(grid, expected, rtol=0, atol=1e-12)
    # The map's mean, bias and max are the summary's grid statistics.
    assert summary["grid_mean"] == pytest.approx(np.abs(expected).mean(), abs=1e-15)
    assert summary["grid_bias"] == pytest.approx(expected.mean(), abs=1e-15)
    assert summary["grid_max"] == pytest.approx(np.abs(expected).max(), abs=1e-15)
    # The sampled statistics are docs/multipliers.md's (bench.multiplier_stats reads the same function).
    sampled = error_stats.error_stats("am16")
    assert {key: summary[key] for key in ("mean", "bias", "max")} == sampled
    docs = Path(__file__).resolve().parents[2] / "docs" / "multipliers.md"
    docs_row = next(line for line in docs.read_text().splitlines() if line.startswith("| `am16` |"))
    assert f"{100 * sampled['mean']:.3f} %" in docs_row and f"{100 * sampled['max']:.3f} %" in docs_row
    assert f"mean |rel. error|        {100 * sampled['mean']:.4g} %" in printed
    assert f"{100 * summary['grid_mean']:.4g} %" in printed and "128 x 128" in printed
    assert summary["p50"] < summary["p90"] < summary["p99"] <= summary["max"]
    assert (tmp_path / "am16-error-map.png").stat().st_size > 10_000


def test_a_table_file_is_mapped_like_the_mode_it_tabulates(tmp_path, lut_dir):
    # ApproxTrain's MIT_7.bin tabulates Mitchell's multiplier on 7-bit mantissas: mit16's map, pair for pair.
    result = describe.write(f"lut:{lut_dir / 'MIT_7.bin'}", tmp_path)
    with np.load(result["files"]["data"]) as data:
        np.testing.assert_allclose(data["relative_error"], from_definition("mitchell", 7), rtol=0, atol=1e-12)
    assert result["files"]["figure"].endswith("lut-MIT_7.bin-error-map.png")


def test_a_32_bit_mode_gets_the_histogram_of_its_sampled_errors(tmp_path):
    result = describe.write("am32", tmp_path)
    relative = error_stats.relative_errors("am32")
    with np.load(result["files"]["data"]) as data:
        counts, edges = data["counts"], data["edges"]
    assert "relative_error" not in result and counts.sum() == error_stats.OPERANDS == relative.size
    assert edges[0] == -edges[-1] == pytest.approx(-result["max"])
    np.testing.assert_array_equal(counts, np.histogram(relative, bins=edges)[0])
    # The histogram's mean (bin centres) is the sampled bias to within half a bin.
    centres = (edges[:-1] + edges[1:]) / 2
    assert abs((counts * centres).sum() / counts.sum() - result["bias"]) < (edges[1] - edges[0]) / 2


def test_native_and_unknown_names_are_refused_with_the_valid_choices(tmp_path, capsys):
    for name in ("native", "am17"):
        with pytest.raises(SystemExit) as stop:
            describe.main([name, "--out", str(tmp_path)])
        assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "'native' is the framework's own multiply" in err and "unknown multiplier 'am17'" in err
    assert f"{', '.join(ops.names(include_native=False))}, or lut:<file>" in err
    assert not list(tmp_path.iterdir())


def test_the_command_runs_under_its_old_name(tmp_path):
    """`python -m ops.describe` (the alias of ops/modes/describe.py) prints the summary and writes the files."""
    result = subprocess.run([sys.executable, "-m", "ops.describe", "mit16", "--out", str(tmp_path)],
                            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mit16" in result.stdout and (tmp_path / "mit16-summary.json").exists()
