"""Run under one Keras backend (KERAS_BACKEND), write what the integer layers compute for fixed inputs and steps.

    KERAS_BACKEND=torch python -m tests.models.integer_probe TABLE_DIR OUT.npz      (from the repository's root)

On a machine with a CUDA GPU, torch's Keras runs it there (tests/device/test_gpu_integer_layers.py).

Every weight and input is drawn from numpy with fixed seeds, so tests/models/test_integer_layers.py can recompute
each result with ops/modes/integer_reference and compare the backends: an IntConv2D under an unsigned EvoApproxLib
circuit (stride 2, SAME, bias) through two training steps (the running range set, then updated), evaluation (the
range frozen) and a training step on a batch holding a NaN; an IntDense under the exact int8 on a 3-D input; an
asymmetric IntConv2D calibrated on two batches; and an IntConv2D (a signed circuit, stride 2) and an IntDense (uint8_sym)
with their gradients through the table, one of them with more taps per filter gradient than the op sums at once.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np

from models.integer_layers import IntConv2D, IntDense


def _numpy(value) -> np.ndarray:
    return keras.ops.convert_to_numpy(value)


def value_and_grads(layer, x: np.ndarray, dy: np.ndarray, training: bool):
    """layer(x) and the gradients of sum(layer(x) * dy) with respect to x and the kernel, as numpy."""
    if keras.backend.backend() == "torch":
        import torch

        xt = torch.tensor(x, requires_grad=True, device=layer.kernel.value.device)  # a GPU's where Keras runs there
        y = layer(xt, training=training)
        (y * torch.tensor(dy, device=y.device)).sum().backward()
        grads = xt.grad.cpu().numpy(), layer.kernel.value.grad.cpu().numpy()
        layer.kernel.value.grad = None
        return (y.detach().cpu().numpy(), *grads)
    import tensorflow as tf

    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt, training=training)
        loss = tf.reduce_sum(y * dy)
    dx, dk = tape.gradient(loss, [xt, layer.kernel])
    return y.numpy(), dx.numpy(), dk.numpy()


def main(table_dir: str, out: str) -> None:
    rng = np.random.default_rng(20261128)
    results = {}
    conv = IntConv2D(6, 3, strides=2, padding="same", multiplier=f"uint8:{Path(table_dir) / 'mul8u_2AC.int8u.npy'}")
    batches = [rng.standard_normal((3, 9, 8, 4)).astype(np.float32) * scale for scale in (1.0, 1.5, 1.0)]
    batches[2][1, 2, 3, 0] = np.nan
    conv.build(batches[0].shape)
    kernel = rng.standard_normal((3, 3, 4, 6)).astype(np.float32) * 0.3
    bias = rng.standard_normal(6).astype(np.float32)
    conv.set_weights([kernel, bias, np.zeros(2, np.float32), np.zeros((), np.float32)])
    results.update(conv_kernel=kernel, conv_bias=bias, conv_batches=np.stack(batches))
    for step in (0, 1):
        dy = rng.standard_normal((3, 5, 4, 6)).astype(np.float32)
        y, dx, dk = value_and_grads(conv, batches[step], dy, training=True)
        results.update({f"conv{step}_dy": dy, f"conv{step}_y": y, f"conv{step}_dx": dx, f"conv{step}_dk": dk,
                        f"conv{step}_range": _numpy(conv.activation_range)})
    results["conv_eval_y"] = _numpy(conv(batches[1], training=False))
    results["conv_nan_y"] = _numpy(conv(batches[2], training=True))
    results["conv_nan_range"] = _numpy(conv.activation_range)
    results["conv_updates"] = _numpy(conv.range_updates)

    dense = IntDense(5, multiplier="int8")
    a = rng.standard_normal((2, 3, 11)).astype(np.float32)
    dense.build(a.shape)
    dense_kernel = rng.standard_normal((11, 5)).astype(np.float32)
    dense.set_weights([dense_kernel, np.zeros(5, np.float32), np.zeros(2, np.float32), np.zeros((), np.float32)])
    dy = rng.standard_normal((2, 3, 5)).astype(np.float32)
    results.update(dense_x=a, dense_kernel=dense_kernel, dense_dy=dy)
    results["dense_y"], results["dense_dx"], results["dense_dk"] = value_and_grads(dense, a, dy, training=True)

    calibrated = IntConv2D(3, 1, multiplier="int8_asym", use_bias=False)
    calibrated.build((2, 4, 4, 2))
    calibrated.calibrating = True
    calibration = [rng.standard_normal((2, 4, 4, 2)).astype(np.float32) * s for s in (1.0, 3.0)]
    for batch in calibration:
        calibrated(batch)
    results.update(calibration=np.stack(calibration), calibrated_range=_numpy(calibrated.activation_range))
    # Gradients through the table: a signed circuit's conv at stride 2, uint8_sym's Dense, and a conv whose filter
    # gradient sums 40 x 30 x 30 = 36,000 taps, past the op's 32,768 (in slices through the centred table's bytes);
    # then the asymmetric schemes (zero points of the range, the weights' per channel): an unsigned circuit's conv at
    # stride 2, uint8's dilated conv, a signed circuit's Dense, and a filter gradient of 37 x 30 x 30 = 33,300 taps.
    luts = Path(table_dir)
    for name, layer, x_shape, kernel_shape, dy_shape in [
            ("table_conv", IntConv2D(5, 3, strides=2, padding="same", use_bias=False, table_gradients=True,
                                     multiplier=f"int8:{luts / 'mul8s_1L2H.int8s.npy'}"),
             (2, 7, 6, 3), (3, 3, 3, 5), (2, 4, 3, 5)),
            ("table_dense", IntDense(4, multiplier="uint8_sym", use_bias=False, table_gradients=True),
             (6, 9), (9, 4), (6, 4)),
            ("big", IntConv2D(3, 3, padding="same", use_bias=False, table_gradients=True,
                              multiplier=f"uint8_sym:{luts / 'mul8u_2AC.int8u.npy'}"),
             (40, 30, 30, 2), (3, 3, 2, 3), (40, 30, 30, 3)),
            ("asym_conv", IntConv2D(4, 3, strides=2, padding="same", use_bias=False, table_gradients=True,
                                    multiplier=f"uint8:{luts / 'mul8u_2AC.int8u.npy'}"),
             (2, 7, 6, 3), (3, 3, 3, 4), (2, 4, 3, 4)),
            ("asym_dilated", IntConv2D(3, 3, dilation_rate=2, padding="valid", use_bias=False, table_gradients=True,
                                       multiplier="uint8"),
             (2, 8, 7, 2), (3, 3, 2, 3), (2, 4, 3, 3)),
            ("asym_dense", IntDense(4, multiplier=f"int8_asym:{luts / 'mul8s_1L2H.int8s.npy'}", use_bias=False,
                                    table_gradients=True),
             (6, 9), (9, 4), (6, 4)),
            ("asym_big", IntConv2D(2, 3, padding="same", use_bias=False, table_gradients=True,
                                   multiplier=f"uint8:{luts / 'mul8u_2AC.int8u.npy'}"),
             (37, 30, 30, 1), (3, 3, 1, 2), (37, 30, 30, 2))]:
        tx = rng.standard_normal(x_shape).astype(np.float32)
        layer.build(tx.shape)
        table_kernel = rng.standard_normal(kernel_shape).astype(np.float32) * 0.3
        layer.set_weights([table_kernel, np.zeros(2, np.float32), np.zeros((), np.float32)])
        tdy = rng.standard_normal(dy_shape).astype(np.float32)
        results.update({f"{name}_x": tx, f"{name}_kernel": table_kernel, f"{name}_dy": tdy})
        (results[f"{name}_y"], results[f"{name}_dx"],
         results[f"{name}_dk"]) = value_and_grads(layer, tx, tdy, training=True)
    np.savez(out, backend=keras.backend.backend(), **results)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
