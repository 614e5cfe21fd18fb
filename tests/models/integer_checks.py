"""The integer layers' results (tests/models/integer_probe.py's, from any backend and device) checked against the
float64/int64 numpy reference (ops/modes/integer_reference.py): shared by tests/models/test_integer_layers.py (the CPU,
both Keras backends) and tests/device/test_gpu_integer_layers.py (a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ops.modes import integer_reference as ir
from ops.modes.operands import same_bits

LUTS = Path(__file__).resolve().parents[2] / "ops" / "luts" / "evoapprox"


def exact(got, want) -> bool:
    """Every element the same bits (NaN payloads included)."""
    return bool(same_bits(np.asarray(got, np.float32), np.asarray(want, np.float32), nan_payloads=True).all())


def check_conv_training_steps(p: dict) -> None:
    """The IntConv2D under mul8u_2AC through two training steps, evaluation and a NaN batch: the running range,
    outputs bit for bit, the straight-through gradients up to the order of fp32 sums and zero where clamped."""
    mode = ir.integer_mode(f"uint8:{LUTS / 'mul8u_2AC.int8u.npy'}")
    x, kernel, bias = p["conv_batches"], p["conv_kernel"], p["conv_bias"]
    running = None
    for step in (0, 1):
        running = ir.update_running_range(running, ir.tensor_range(x[step]))
        assert exact(p[f"conv{step}_range"], running), f"step {step}: the running range"
        want = ir.conv2d_forward(x[step], kernel, mode, strides=2, padding="SAME", bias=bias,
                                 activation_range=running)
        assert exact(p[f"conv{step}_y"], want), f"step {step}: outputs"
        dx, dk = ir.conv2d_backward(x[step], kernel, p[f"conv{step}_dy"], mode, strides=2, padding="SAME",
                                    activation_range=running)
        np.testing.assert_allclose(p[f"conv{step}_dx"], dx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(p[f"conv{step}_dk"], dk, rtol=1e-5, atol=1e-4)
        assert np.array_equal(p[f"conv{step}_dx"] == 0, dx == 0), "the straight-through mask of x"
    # The second batch is 1.5x wider than the running range: its clamped inputs get no gradient.
    assert (p["conv1_dx"] == 0).sum() > 0
    frozen = ir.conv2d_forward(x[1], kernel, mode, strides=2, padding="SAME", bias=bias, activation_range=running)
    assert exact(p["conv_eval_y"], frozen), "evaluation quantises with the range as it stands"
    assert exact(p["conv_nan_range"], running), "a batch holding a NaN leaves the range unchanged"
    assert float(p["conv_updates"]) == 2.0
    assert np.isnan(p["conv_nan_y"]).all(), "an input holding a NaN makes every output NaN"


def check_table_gradients(p: dict) -> None:
    """table_gradients=True: dx and dw are exact integer sums rescaled once, so the layers give the reference's every
    bit (ops.keras_integer composes them from the forward's op; the reference gathers tap by tap)."""
    conv = ir.integer_mode(f"int8:{LUTS / 'mul8s_1L2H.int8s.npy'}")
    dx, dk = ir.conv2d_table_backward(p["table_conv_x"], p["table_conv_kernel"], p["table_conv_dy"], conv, strides=2,
                                      padding="SAME")
    assert exact(p["table_conv_dx"], dx) and exact(p["table_conv_dk"], dk)
    ste_dx, _ = ir.conv2d_backward(p["table_conv_x"], p["table_conv_kernel"], p["table_conv_dy"], conv, strides=2,
                                   padding="SAME")
    assert not exact(dx, ste_dx), "the table gradient is not the straight-through one"
    dense = ir.integer_mode("uint8_sym")
    dx, dk = ir.dense_table_backward(p["table_dense_x"], p["table_dense_kernel"], p["table_dense_dy"], dense)
    assert exact(p["table_dense_dx"], dx) and exact(p["table_dense_dk"], dk)
    want = ir.conv2d_forward(p["table_conv_x"], p["table_conv_kernel"], conv, strides=2, padding="SAME")
    assert exact(p["table_conv_y"], want), "the forward is the same with either gradient"
    big = ir.integer_mode(f"uint8_sym:{LUTS / 'mul8u_2AC.int8u.npy'}")  # dw: 36,000 taps, in slices
    dx, dk = ir.conv2d_table_backward(p["big_x"], p["big_kernel"], p["big_dy"], big, padding="SAME")
    assert exact(p["big_dx"], dx) and exact(p["big_dk"], dk)
    # The asymmetric schemes: the zero points of the ranges, w's per channel (dx takes each tap channel's off).
    unsigned = ir.integer_mode(f"uint8:{LUTS / 'mul8u_2AC.int8u.npy'}")
    for name, mode, geometry in [("asym_conv", unsigned, dict(strides=2, padding="SAME")),
                                 ("asym_dilated", ir.integer_mode("uint8"), dict(padding="VALID", dilations=2)),
                                 ("asym_big", unsigned, dict(padding="SAME"))]:
        dx, dk = ir.conv2d_table_backward(p[f"{name}_x"], p[f"{name}_kernel"], p[f"{name}_dy"], mode, **geometry)
        assert exact(p[f"{name}_dx"], dx) and exact(p[f"{name}_dk"], dk), name
        assert np.abs(dx).max() > 0 and np.abs(dk).max() > 0, name
    signed = ir.integer_mode(f"int8_asym:{LUTS / 'mul8s_1L2H.int8s.npy'}")
    dx, dk = ir.dense_table_backward(p["asym_dense_x"], p["asym_dense_kernel"], p["asym_dense_dy"], signed)
    assert exact(p["asym_dense_dx"], dx) and exact(p["asym_dense_dk"], dk)
