"""The integer layers (models/integer_layers.py) on Keras' TensorFlow and torch backends against the float64/int64
numpy reference of the quantised arithmetic (ops/modes/integer_reference.py): the running activation range step by
step, outputs bit for bit, the straight-through gradients (the same bits on both backends; the reference's up to the
order of fp32 sums, and zero exactly where the quantiser clamped), evaluation with the range frozen, a NaN batch,
calibration, and the layers inside a model built for an integer mode.

Each backend runs tests/models/integer_probe.py in its own process (Keras picks its backend once, at import).
"""

from __future__ import annotations

import numpy as np
import pytest

from ops.modes import integer_reference as ir
from tests.models.helpers import ROOT, run_python
from tests.models.integer_checks import check_conv_training_steps, check_table_gradients, exact

LUTS = ROOT / "ops" / "luts" / "evoapprox"

PROBE = "tests.models.integer_probe"
BACKENDS = ("tensorflow", "torch")


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for backend in BACKENDS:
        path = tmp_path_factory.mktemp(backend) / "probe.npz"
        result = run_python(backend, "-m", PROBE, str(LUTS), str(path))
        assert result.returncode == 0, f"{backend} probe failed:\n{result.stderr[-3000:]}"
        with np.load(path) as data:
            out[backend] = {key: data[key] for key in data.files}
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_training_steps_follow_the_reference(probes, backend):
    p = probes[backend]
    assert str(p["backend"]) == backend
    check_conv_training_steps(p)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dense_on_a_3d_input_and_calibration(probes, backend):
    p = probes[backend]
    mode = ir.integer_mode("int8")
    rows = p["dense_x"].reshape(-1, 11)
    want = ir.dense_forward(rows, p["dense_kernel"], mode, bias=np.zeros(5, np.float32))
    assert exact(p["dense_y"].reshape(-1, 5), want)
    dx, dk = ir.dense_backward(rows, p["dense_kernel"], p["dense_dy"].reshape(-1, 5), mode)
    np.testing.assert_allclose(p["dense_dx"].reshape(-1, 11), dx, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(p["dense_dk"], dk, rtol=1e-5, atol=1e-5)
    want_range = ir.calibration_range([ir.tensor_range(batch) for batch in p["calibration"]])
    assert exact(p["calibrated_range"], want_range)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_the_table_are_the_references_bits(probes, backend):
    check_table_gradients(probes[backend])


@pytest.mark.parametrize("key", ["conv0_y", "conv0_dx", "conv0_dk", "conv1_y", "conv1_dx", "conv1_dk",
                                 "conv_eval_y", "dense_y", "dense_dx", "dense_dk", "calibrated_range",
                                 "table_conv_dx", "table_conv_dk", "table_dense_dx", "table_dense_dk", "big_dk"])
def test_both_backends_give_the_same_bits(probes, key):
    """The same CPU kernels behind both bindings and the same quantiser: every value bit for bit."""
    tf_value, torch_value = probes["tensorflow"][key], probes["torch"][key]
    assert np.abs(tf_value).max() > 0.01, "the probe must compute something non-trivial"
    assert exact(tf_value, torch_value), f"{key}: the backends differ"


def test_models_build_integer_layers_and_refuse_mixups():
    import keras

    from models import build_model
    from models.integer_layers import IntConv2D, IntDense
    from models.layers import AMConv2D

    model = build_model("lenet5", f"int8:{LUTS / 'mul8s_1L2H.int8s.npy'}", (28, 28, 1), 10)
    kinds = [type(layer).__name__ for layer in model.layers if isinstance(layer, (IntConv2D, IntDense))]
    assert kinds == ["IntConv2D", "IntConv2D", "IntDense", "IntDense", "IntDense"]
    assert model.get_layer("conv1").get_config()["multiplier"].endswith("mul8s_1L2H.int8s.npy")
    assert [w.name for w in model.get_layer("conv1").weights] == ["kernel", "bias", "activation_range",
                                                                 "range_updates"]
    assert keras.ops.convert_to_numpy(model(np.zeros((2, 28, 28, 1), np.float32))).shape == (2, 10)
    with pytest.raises(ValueError, match="is an integer mode: its layers are IntConv2D"):
        AMConv2D(4, 3, multiplier="int8")
    with pytest.raises(ValueError, match="signed table"):
        build_model("lenet5", f"uint8:{LUTS / 'mul8s_1L2H.int8s.npy'}", (28, 28, 1), 10)
    # table_gradients reaches every integer layer, of either scheme
    model = build_model("lenet5", "int8", (28, 28, 1), 10, table_gradients=True,
                        layers={"predictions": ("native", False)})
    flags = {layer.name: getattr(layer, "table_gradients", None) for layer in model.layers
             if isinstance(layer, (IntConv2D, IntDense, keras.layers.Dense))}
    assert flags == {"conv1": True, "conv2": True, "fc1": True, "fc2": True, "predictions": None}
    model = build_model("lenet5", "uint8", (28, 28, 1), 10, table_gradients=True)
    assert all(layer.table_gradients for layer in model.layers if isinstance(layer, (IntConv2D, IntDense)))
