"""The AM layers and models on Keras' TensorFlow and torch backends: the same bits from the same kernels, a model that
trains on the torch backend, a clear error on a backend without kernels, and `import ops` loading no framework.

Each backend runs in its own process (Keras picks its backend once, at import, from KERAS_BACKEND); both are real:
the TF custom ops and the PyTorch binding of the same CPU kernels (ops/cc/conv_cpu.cc), built on first use.
"""

from __future__ import annotations

import numpy as np
import pytest

from ops.modes.operands import same_bits
from tests.models.helpers import run_python

PROBE = "tests.models.backend_probe"  # run as a module from ROOT: this checkout's ops and models


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> dict[str, dict[str, np.ndarray]]:
    """backend -> the probe's results under am16."""
    out = {}
    for backend in ("tensorflow", "torch"):
        path = tmp_path_factory.mktemp(backend) / "probe.npz"
        result = run_python(backend, "-m", PROBE, "am16", str(path))
        assert result.returncode == 0, f"{backend} probe failed:\n{result.stderr[-3000:]}"
        with np.load(path) as data:
            out[backend] = {key: data[key] for key in data.files}
    return out


def test_each_probe_ran_on_its_backend(probes):
    assert {str(p["backend"]) for p in probes.values()} == {"tensorflow", "torch"}
    assert [str(p["backend"]) for p in probes.values()] == list(probes)


@pytest.mark.parametrize("key", ["conv_y", "conv_dx", "conv_dk", "dense_y", "dense_dx", "dense_dk"])
def test_am_layers_give_the_same_bits_on_both_backends(probes, key):
    """The same CPU kernels behind both bindings: outputs and both gradients bit for bit (layouts permuted right)."""
    tf_value, torch_value = probes["tensorflow"][key], probes["torch"][key]
    assert tf_value.shape == torch_value.shape
    assert np.abs(tf_value).max() > 0.1, "the probe must compute something non-trivial"
    same = same_bits(tf_value, torch_value, nan_payloads=True)
    assert same.all(), f"{key}: {int((~same).sum())} of {same.size} values differ between the backends"


def test_resnet18_agrees_across_backends(probes):
    """The whole network (batch norm, pooling and softmax are each backend's own): the same probabilities to fp32
    rounding, and not a degenerate output."""
    tf_p, torch_p = probes["tensorflow"]["resnet18_probabilities"], probes["torch"]["resnet18_probabilities"]
    assert tf_p.shape == (4, 10)
    np.testing.assert_allclose(tf_p.sum(axis=1), 1.0, rtol=1e-5)
    assert tf_p.max() < 0.99 and tf_p.min() > 1e-4, "weights chosen so the softmax is not saturated"
    np.testing.assert_allclose(torch_p, tf_p, rtol=2e-4, atol=1e-6)


def test_import_ops_loads_no_framework(probes):
    for backend, probe in probes.items():
        assert list(probe["frameworks_after_import"]) == [], f"`import ops` under {backend}"
    script = ("import sys, ops, models; ops.names(); ops.parse('am16'); ops.product(1.5, 2.25, 'am16'); "
              "models.names(); print(sorted({'tensorflow', 'torch', 'keras'} & set(sys.modules)))")
    result = run_python("torch", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_import_keras_leaves_out_its_optional_integrations_which_stay_importable():
    """models.engines.import_keras: Keras without scikit-learn, matplotlib and pandas (2.1-2.7 CPU s of the import);
    imported afterwards, pandas loads as usual."""
    script = ("import sys; from models.engines import KERAS_OPTIONAL, import_keras; keras = import_keras(); "
              "print([m for m in KERAS_OPTIONAL if m in sys.modules]); import pandas; "
              "print(pandas.DataFrame({'a': [1, 2]}).shape, keras.backend.backend(), import_keras() is keras)")
    result = run_python("torch", "-c", script)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == ["[]", "(2, 1) torch True"], result.stdout


TRAIN_ON_TORCH = """
import keras, numpy as np, torch
from models import build_model, datasets
data = datasets.load("digits", None)
model = build_model("lenet5", "am16", data.input_shape, data.num_classes, seed=0)
model.compile(optimizer=keras.optimizers.SGD(0.02, momentum=0.9), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"], jit_compile=False)
keras.utils.set_random_seed(0)
model.fit(data.x_train, data.y_train, batch_size=64, epochs=6, verbose=0, shuffle=True)
loss, accuracy = model.evaluate(data.x_test, data.y_test, verbose=0)
conv = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)][0]
print(keras.backend.backend(), type(conv.kernel.value).__module__, accuracy)
"""


def test_lenet5_trains_under_am16_on_the_torch_backend():
    """Real training through the PyTorch binding's autograd (both gradients through the multiplier)."""
    result = run_python("torch", "-c", TRAIN_ON_TORCH)
    assert result.returncode == 0, result.stderr[-3000:]
    backend, module, accuracy = result.stdout.split()[-3:]
    assert backend == "torch" and module.startswith("torch")
    assert float(accuracy) >= 0.85, f"LeNet-5 am16 on digits after 6 epochs on the torch backend: {accuracy}"


def test_a_backend_without_kernels_is_refused_by_name(monkeypatch):
    """Keras' jax and numpy backends (jax is not installed here, so the backend's name is patched): building an AM
    layer there says which backends have kernels, instead of failing somewhere inside the first call."""
    import keras

    from models.layers import AMConv2D, AMDense

    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    for build in (lambda: AMDense(3, multiplier="am16"), lambda: AMConv2D(4, 3, multiplier="am32")):
        with pytest.raises(ValueError, match="the AM layers run on the Keras backends tensorflow, torch; this process "
                                             "runs Keras on 'jax'"):
            build()
