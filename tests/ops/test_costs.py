"""A multiplier's hardware cost (ops.modes.costs): the exact modes at 1 by definition, the others only with a source,
a table's figures from its side file, and a side file that cannot be used refused with what would be right."""
import json
import shutil
from pathlib import Path

import pytest

from ops.modes import costs
from ops.modes.multipliers import MODES, parse

LUTS = Path(__file__).resolve().parents[1] / "data" / "approxtrain-luts"


def test_builtin_figures_have_a_source_or_are_absent():
    by_name = {mode.name: mode.cost for mode in MODES}
    for name in ("native", "acc32", "acc16", "fp16"):
        assert by_name[name].figures() == {"power": 1.0, "area": 1.0, "delay": 1.0, "energy": 1.0}
        assert "by definition" in by_name[name].source
    assert all(by_name[name] is None for name in ("am32", "am16", "mit32", "mit16"))  # nothing unsourced


def test_a_table_takes_its_figures_from_its_side_file(tmp_path):
    table = shutil.copy(LUTS / "MBM_7.bin", tmp_path / "mul8s_1L2H.bin")
    assert parse(f"lut:{table}").cost is None
    figures = {"power": 0.7082, "area": 0.7658, "delay": 0.9189, "reference": "mul8s_1KV8",
               "source": "EvoApproxLib d321f7f6, PDK45", "absolute": {"pwr_mW": 0.301}}
    (tmp_path / "mul8s_1L2H.cost.json").write_text(json.dumps(figures))
    cost = parse(f"lut:{table}").cost  # a new side file is read again, the table's cache notwithstanding
    assert cost.figures() == {"power": 0.7082, "area": 0.7658, "delay": 0.9189, "energy": None}
    assert (cost.reference, cost.absolute) == ("mul8s_1KV8", {"pwr_mW": 0.301})


@pytest.mark.parametrize(("content", "message"), [
    ("{", "is not readable JSON"),
    ('{"energy": 0.5}', "source is missing: name the publication"),
    ('{"energy": -1, "source": "x"}', "energy=-1 must be a positive number"),
    ('{"source": "x"}', "no figure given"),
    ('{"energy": 0.5, "source": "x", "watts": 3}', "unknown key 'watts'"),
])
def test_a_bad_side_file_is_refused_naming_it(tmp_path, content, message):
    table = shutil.copy(LUTS / "MIT_7.bin", tmp_path / "T.bin")
    (tmp_path / "T.cost.json").write_text(content)
    with pytest.raises(ValueError, match="T.cost.json") as error:
        parse(f"lut:{table}")
    assert message in str(error.value)
