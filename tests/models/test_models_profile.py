"""`python -m models.profile`: one line per AM layer of the model with its shapes and multiply count, forward and
backward times of the AM layer and of its native twin, whose weights and outputs are the AM layer's up to the
multiplier (acc32 against native agrees to fp32 rounding)."""

import csv

import numpy as np
import pytest
import tensorflow as tf

import models
from models import profile


def test_lenet5_profile_has_every_am_layer_with_its_shapes_and_times(tmp_path, capsys):
    out = tmp_path / "lenet5.md"
    assert profile.main(["--model", "lenet5", "--mult", "am16", "--batch-size", "4", "--repeats", "3",
                         "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out.with_suffix(".csv"))))
    assert [r["layer"] for r in rows] == ["conv1", "conv2", "fc1", "fc2", "predictions", "total"]
    assert [r["input"] for r in rows[:5]] == ["4x32x32x1", "4x14x14x6", "4x400", "4x120", "4x84"]
    assert [r["kernel"] for r in rows[:5]] == ["5x5x1x6", "5x5x6x16", "400x120", "120x84", "84x10"]
    products = [4 * 28 * 28 * 6 * 25, 4 * 10 * 10 * 16 * 150, 4 * 400 * 120, 4 * 120 * 84, 4 * 84 * 10]
    assert [int(r["mults_per_forward"]) for r in rows] == products + [sum(products)]
    for r in rows:
        assert r["device"] == "CPU:0"
        for stage in ("forward", "backward"):
            am, native = float(r[f"{stage}_am_ms"]), float(r[f"{stage}_native_ms"])
            assert am >= 0 and native >= 0 and (stage == "backward" or am > 0 and native > 0)
    assert float(rows[-1]["forward_am_ms"]) == pytest.approx(sum(float(r["forward_am_ms"]) for r in rows[:5]))
    printed = capsys.readouterr().out
    assert "| conv1 | AMConv2D | 4x32x32x1 | 5x5x1x6 | 470,400 | CPU:0 |" in printed
    assert out.read_text().splitlines()[0].startswith("Per-layer time of lenet5 under am16 against the native")


def test_the_profile_runs_on_the_torch_backend(tmp_path):
    """The same command on Keras' torch backend (how it runs on a GPU machine without TensorFlow): every layer timed
    through the PyTorch binding, on torch's device."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "torch.md"
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "models.profile", "--model", "lenet5", "--mult", "am16",
                             "--batch-size", "4", "--repeats", "2", "--out", str(out)], cwd=root, capture_output=True,
                            text=True, timeout=600, env={**os.environ, "KERAS_BACKEND": "torch",
                                                         "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(root)})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = list(csv.DictReader(open(out.with_suffix(".csv"))))
    assert [r["layer"] for r in rows] == ["conv1", "conv2", "fc1", "fc2", "predictions", "total"]
    assert {r["device"] for r in rows} == {"cpu"}
    assert all(float(r["forward_am_ms"]) > 0 and float(r["forward_native_ms"]) > 0 for r in rows)


def test_the_native_twin_is_the_am_layer_without_the_multiplier():
    model = models.build_model("lenet5", "acc32", (8, 8, 1), 10, seed=3)
    conv2 = profile.am_layers(model)[1]
    x = tf.constant(np.random.default_rng(0).standard_normal((2, 14, 14, 6)).astype(np.float32))
    twin = profile.native_twin(conv2, tuple(x.shape))
    assert type(twin).__name__ == "Conv2D" and twin.name == "conv2"
    np.testing.assert_allclose(twin(x).numpy(), conv2(x).numpy(), rtol=1e-5, atol=1e-5)


def test_native_and_unknown_arguments_are_refused(capsys):
    for argv in (["--model", "lenet5", "--mult", "native"], ["--model", "lenet6", "--mult", "am16"],
                 ["--model", "lenet5", "--mult", "am16", "--dataset", "imagenet"]):
        with pytest.raises(SystemExit) as stop:
            profile.main(argv)
        assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--mult native has no AM layers to time" in err
    assert "unknown model 'lenet6'; valid models: lenet300, lenet5" in err
    assert "--dataset 'imagenet': valid data sets are digits, mnist" in err
