"""ops.path_counts(): the kernels say which path ran. Ordinary operands and a few steps of LeNet-5 training (am16,
acc32) take the fast kernel only; operands with inf or underflowing products take the generic one, in the blocks
that read them only.

The fast kernels exist on x86-64-v3 (AVX2) and x86-64-v4 (AVX-512) builds, for every mode: elsewhere every call is
generic by design, and the tests that expect the fast path are skipped with the target named.
"""
from __future__ import annotations

import numpy as np
import pytest

import ops
from ops.build import cpu_target

FAST_TARGET = cpu_target()[0].startswith(("x86-64-v4", "x86-64-v3"))
needs_fast = pytest.mark.skipif(not FAST_TARGET, reason=f"target {cpu_target()[0]} has no fast kernels (AVX2)")
MODES = ("acc32", "am16", "am32", "mit16")


def _delta(work) -> dict:
    before = ops.path_counts()
    work()
    after = ops.path_counts()
    return {key: after[key] - before[key] for key in after}


@needs_fast
@pytest.mark.parametrize("mode", MODES)
def test_ordinary_operands_take_the_fast_path(mode):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((40, 30)).astype(np.float32), rng.standard_normal((30, 20)).astype(np.float32)
    x, w = rng.standard_normal((2, 9, 9, 3)).astype(np.float32), rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    assert _delta(lambda: ops.matmul(a, b, multiplier=mode)) == \
        {"fast_calls": 1, "generic_calls": 0, "fast_products": 40 * 30 * 20, "generic_products": 0}
    assert _delta(lambda: ops.conv2d(x, w, padding="VALID", multiplier=mode)) == \
        {"fast_calls": 1, "generic_calls": 0, "fast_products": 2 * 7 * 7 * 27 * 5, "generic_products": 0}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("special", [np.inf, np.nan, 1e-37], ids=["inf", "nan", "underflow"])
def test_inf_nan_and_underflow_take_the_generic_path(mode, special):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((40, 30)).astype(np.float32), rng.standard_normal((30, 20)).astype(np.float32)
    a[3, 7] = special  # 1e-37 (biased exponent 4): its products with O(1) values leave the normal range
    counts = _delta(lambda: ops.matmul(a, b, multiplier=mode))
    assert counts["fast_calls"] == 0 and counts["generic_calls"] == 1, counts
    assert counts["generic_products"] > 0 and counts["fast_products"] + counts["generic_products"] == 40 * 30 * 20


@needs_fast
@pytest.mark.parametrize("mode", MODES)
def test_one_tiny_value_sends_only_its_blocks_to_the_generic_path(mode):
    """A gradient with one value near the bottom of the range: the fast kernel still does the blocks that do not
    read it (at most one 384-row by 128-deep block of A here, with every block of B: <= 384 * 128 / (1200 * 300))."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((1200, 300)).astype(np.float32), rng.standard_normal((300, 16)).astype(np.float32)
    a[500, 10] = 1e-37
    counts = _delta(lambda: ops.matmul(a, b, multiplier=mode))
    total = 1200 * 300 * 16
    assert counts["generic_calls"] == 1 and counts["fast_products"] + counts["generic_products"] == total, counts
    assert 0 < counts["generic_products"] <= total * 384 * 128 // (1200 * 300), counts


@needs_fast
@pytest.mark.parametrize("mode", ["am16", "acc32"])
def test_lenet5_training_steps_take_the_fast_path_only(mode):
    import keras
    import tensorflow as tf

    from models import build_model, datasets

    data = datasets.load("digits", None)
    model = build_model("lenet5", mode, data.input_shape, data.num_classes, seed=0)
    optimizer = keras.optimizers.SGD(0.02, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    def train_steps():
        for step, x, y in datasets.batches(data, 64, 0, 0):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            variables = model.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            if step == 4:
                break

    counts = _delta(train_steps)
    # 5 steps x (5 forward GEMMs + 4 dense and 2 conv filter gradients + the input gradients of 4 dense and conv2
    # layers; conv2's per image): every one fast.
    assert counts["generic_calls"] == 0 and counts["generic_products"] == 0, counts
    assert counts["fast_calls"] >= 5 * 15 and counts["fast_products"] > 5 * 64 * 400_000, counts
