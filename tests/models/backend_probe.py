"""Run under one Keras backend (KERAS_BACKEND), write what the AM layers and a model compute for fixed inputs.

    KERAS_BACKEND=torch python -m tests.models.backend_probe MULTIPLIER OUT.npz      (from the repository's root)

Every weight and input is drawn from numpy with fixed seeds, so the runs under different backends compute the same
thing and tests/models/test_models_backends.py compares them: AMConv2D (stride 2, SAME, a 3x3 kernel), AMDense,
their outputs and the gradients of a fixed loss with respect to input and kernel, and ResNet-18's class
probabilities (inference mode) on 8x8x3 images. Also records which framework modules `import ops` loaded.
"""

from __future__ import annotations

import sys

import numpy as np

import ops  # noqa: F401

FRAMEWORKS_AFTER_IMPORT = sorted({"tensorflow", "torch"} & set(sys.modules))

import keras  # noqa: E402

from models import build_model  # noqa: E402
from models.layers import AMConv2D, AMDense  # noqa: E402


def _weights_like(layer, rng):
    return [rng.standard_normal(tuple(w.shape)).astype(np.float32) * 0.3 for w in layer.get_weights()]


def _model_weight(variable, rng) -> np.ndarray:
    """Conv kernels at variance 1 / fan-in, the classifier 10x smaller (so the residual sums do not saturate the
    softmax), batch-norm statistics plausible."""
    shape = tuple(variable.shape)
    w = rng.standard_normal(shape).astype(np.float32)
    if len(shape) > 1:
        return w * np.float32(np.sqrt(1.0 / np.prod(shape[:-1])) * (0.1 if len(shape) == 2 else 1.0))
    if "moving_variance" in variable.path:
        return np.abs(w) * 0.5 + 0.5
    return 1.0 + 0.1 * w if "gamma" in variable.path else 0.1 * w


def value_and_grads(layer, x: np.ndarray, dy_seed: int):
    """layer(x) and the gradients of sum(layer(x) * dy) with respect to x and the kernel, as numpy."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        xt = torch.tensor(x, requires_grad=True)
        y = layer(xt)
        dy = torch.tensor(np.random.default_rng(dy_seed).standard_normal(tuple(y.shape)).astype(np.float32))
        (y * dy).sum().backward()
        return y.detach().numpy(), xt.grad.numpy(), layer.kernel.value.grad.numpy()
    import tensorflow as tf

    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt)
        dy = np.random.default_rng(dy_seed).standard_normal(tuple(y.shape)).astype(np.float32)
        loss = tf.reduce_sum(y * dy)
    dx, dk = tape.gradient(loss, [xt, layer.kernel])
    return y.numpy(), dx.numpy(), dk.numpy()


def main(multiplier: str, out: str) -> None:
    rng = np.random.default_rng(20261123)
    results = {}
    conv = AMConv2D(6, 3, strides=2, padding="same", multiplier=multiplier, use_bias=True)
    x = rng.standard_normal((3, 9, 8, 4)).astype(np.float32)
    conv.build(x.shape)
    conv.set_weights(_weights_like(conv, rng))
    results["conv_y"], results["conv_dx"], results["conv_dk"] = value_and_grads(conv, x, 1)
    dense = AMDense(5, multiplier=multiplier)
    a = rng.standard_normal((7, 11)).astype(np.float32)
    dense.build(a.shape)
    dense.set_weights(_weights_like(dense, rng))
    results["dense_y"], results["dense_dx"], results["dense_dk"] = value_and_grads(dense, a, 2)
    model = build_model("resnet18", multiplier, (8, 8, 3), 10)
    model.set_weights([_model_weight(v, rng) for v in model.weights])
    images = rng.standard_normal((4, 8, 8, 3)).astype(np.float32)
    results["resnet18_probabilities"] = keras.ops.convert_to_numpy(model(images, training=False))
    np.savez(out, backend=keras.backend.backend(), frameworks_after_import=np.array(FRAMEWORKS_AFTER_IMPORT, str),
             **results)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
