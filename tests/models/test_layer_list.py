"""A network's layers under per-layer multipliers: each layer really runs under its own multiplier on both engines,
`python -m models.layer_list` lists the right shapes and multiply-accumulates, and the relative multiplication energy
is the hand count."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from models import layer_list
from models.layer_rules import RuleError, resolve, setting

ROOT = Path(__file__).resolve().parents[2]
LUTS = ROOT / "tests" / "data" / "approxtrain-luts"
# LeNet-5 on 32x32x1 (digits are upsampled and padded to it), by hand: output elements x kernel-size x input channels
LENET5_MACS = {"conv1": 28 * 28 * 6 * 5 * 5 * 1, "conv2": 10 * 10 * 16 * 5 * 5 * 6, "fc1": 400 * 120, "fc2": 120 * 84,
               "predictions": 84 * 10}


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_each_layer_runs_under_its_own_multiplier(backend):
    import keras

    if keras.backend.backend() == backend:  # this process's engine: no second process to start
        from tests.models import mixed_probe

        mixed_probe.main()
        return
    env = {**os.environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-m", "tests.models.mixed_probe"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0 and f"same bits on {backend}" in result.stdout, result.stderr[-3000:]


def test_listing_command_values(capsys, tmp_path):
    assert layer_list.main(["lenet5", "--mult", "am16", "--keep", "first_last", "--csv", str(tmp_path / "l.csv")]) == 0
    out = capsys.readouterr().out
    assert "| conv1 | conv | first | 32x32x1 | 5x5x1x6 | 28x28x6 | 117,600 | 28.23 % | native |  | 1.000 |" in out
    assert "| conv2 | conv |  | 14x14x6 | 5x5x6x16 | 10x10x16 | 240,000 | 57.62 % | am16 |  | - |" in out
    assert "| predictions | dense | last | 84 | 84x10 | 10 | 840 | 0.20 % | native |  | 1.000 |" in out
    assert "5 layers, 416,520 multiply-accumulates per image; relative multiplication energy: unknown (no published " \
           "energy figure for am16)" in out
    rows = (tmp_path / "l.csv").read_text().splitlines()
    assert rows[0].split(",")[:7] == list(layer_list.COLUMNS[:7])
    assert [int(r.split(",")[6]) for r in rows[1:]] == list(LENET5_MACS.values())


def test_listing_command_refuses_bad_rules(capsys):
    with pytest.raises(SystemExit):
        layer_list.main(["lenet5", "--rule", "stage4=mit16"])
    assert "'stage4' matches no layer of lenet5" in capsys.readouterr().err


def test_relative_energy_is_the_hand_count(tmp_path):
    """conv2 under a table whose side file says 0.25 of the exact multiplier's energy, fc* under one at 0.5, the rest
    native (1): (117,600 + 0.25 x 240,000 + 0.5 x (48,000 + 10,080) + 840) / 416,520."""
    import models

    for name, energy in (("QUARTER", 0.25), ("HALF", 0.5)):
        shutil.copy(LUTS / "MBM_7.bin", tmp_path / f"{name}.bin")
        (tmp_path / f"{name}.cost.json").write_text(json.dumps({"energy": energy, "power": energy,
                                                                "source": "a test's own figures"}))
    rules = [{"match": "conv2", "mult": f"lut:{tmp_path / 'QUARTER.bin'}"},
             {"match": "fc*", "mult": f"lut:{tmp_path / 'HALF.bin'}"}]
    settings = resolve("lenet5", setting("native"), rules)
    model = models.build_model("lenet5", "native", (8, 8, 1), 10)
    rows = layer_list.layer_rows("lenet5", model, settings)
    assert {r["layer"]: r["macs_per_image"] for r in rows} == LENET5_MACS
    assert [r["relative_energy"] for r in rows] == [1.0, 0.25, 0.5, 0.5, 1.0]
    expected = (117_600 + 0.25 * 240_000 + 0.5 * (48_000 + 10_080) + 840) / 416_520
    assert layer_list.network_energy(rows) == pytest.approx(expected, rel=1e-12)
    assert layer_list.network_energy(layer_list.layer_rows("lenet5", model, resolve("lenet5", setting("native")))) \
        == 1.0
    with pytest.raises(RuleError):
        resolve("lenet5", setting("native"), [{"match": "conv9", "mult": "am16"}])
