"""models.batchnorm: on Keras' torch backend the fused normalisation computes what Keras' own layer computes (outputs,
the three gradients, the moving statistics, inference) to float32 rounding; on TensorFlow it is Keras' layer, bit for
bit. Each backend runs in its own process (Keras picks its backend at import)."""

from __future__ import annotations

import json

import pytest

from tests.models.test_models_backends import run_python

PROBE = r"""
import json, sys
import numpy as np
import keras
from keras import ops as K
from models.batchnorm import BatchNormalization

rng = np.random.default_rng(7)
x = (rng.standard_normal((6, 5, 4, 3)) * 2 + 0.5).astype(np.float32)
upstream = rng.standard_normal(x.shape).astype(np.float32)
out = {}
for training in (True, False):
    layers = [cls(momentum=0.9, epsilon=1e-5) for cls in (BatchNormalization, keras.layers.BatchNormalization)]
    results = []
    for layer in layers:
        layer.build(x.shape)
        layer.set_weights([np.float32([1.5, 0.5, -1.0]), np.float32([0.1, -0.2, 0.3]),
                           np.float32([0.2, -0.1, 0.4]), np.float32([1.3, 0.7, 2.0])])
        if keras.backend.backend() == "torch":
            import torch
            xt = torch.tensor(x, requires_grad=True)
            y = layer(xt, training=training)
            (y * torch.tensor(upstream)).sum().backward()
            grads = [xt.grad.numpy(), layer.gamma.value.grad.numpy(), layer.beta.value.grad.numpy()]
            y = y.detach().numpy()
        else:
            import tensorflow as tf
            xt = tf.constant(x)
            with tf.GradientTape() as tape:
                tape.watch(xt)
                y = layer(xt, training=training)
                loss = tf.reduce_sum(y * upstream)
            grads = [g.numpy() for g in tape.gradient(loss, [xt, layer.gamma, layer.beta])]
            y = y.numpy()
        results.append([y, *grads, np.asarray(layer.moving_mean.numpy()), np.asarray(layer.moving_variance.numpy())])
    ours, keras_own = results
    fused = layers[0]._fused(xt, None)
    moved = float(np.max(np.abs(ours[4] - np.float32([0.2, -0.1, 0.4]))))
    out[str(training)] = {"max_abs": [float(np.max(np.abs(a - b))) for a, b in zip(ours, keras_own)],
                          "same_bits": [bool(np.array_equal(a, b)) for a, b in zip(ours, keras_own)],
                          "scale": [float(np.max(np.abs(b))) for b in keras_own], "moved": moved}
out["fused"] = fused
print(json.dumps(out))
"""
NAMES = ["output", "d_input", "d_gamma", "d_beta", "moving_mean", "moving_variance"]


def _probe(backend: str) -> dict:
    result = run_python(backend, "-c", PROBE)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_torch_fused_batch_norm_computes_keras_batch_norm():
    probe = _probe("torch")
    for training, numbers in ((k, v) for k, v in probe.items() if k != "fused"):
        for name, diff, scale in zip(NAMES, numbers["max_abs"], numbers["scale"]):
            assert scale > 0.05, f"{name}: the probe must compare something"
            assert diff <= 2e-6 * max(scale, 1.0), f"training={training} {name}: {diff} off Keras' layer"
    assert probe["fused"] is True, "the torch backend must take the fused path"
    # Training moved the statistics away from the values set (momentum 0.9), inference left them.
    assert probe["True"]["moved"] > 1e-3 and probe["False"]["moved"] == 0.0


@pytest.mark.parametrize("backend", ["tensorflow"])
def test_tensorflow_batch_norm_is_keras_own(backend):
    probe = _probe(backend)
    assert probe.pop("fused") is False
    for training, numbers in probe.items():
        assert all(numbers["same_bits"]), f"training={training}: {dict(zip(NAMES, numbers['same_bits']))}"
