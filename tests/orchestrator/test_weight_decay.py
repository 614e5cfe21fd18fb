"""Coupled L2 weight decay (conf/train/cifar.yaml): the gradient the optimizer sees is dloss/dw + wd * w, so one SGD
step moves w by -lr * (g + wd * w); the decoupled mode leaves the gradient alone and uses Keras' own decay."""
from __future__ import annotations

import numpy as np
import pytest

from tests.orchestrator.helpers import compose


def _one_step(train_overrides, lr=0.1):
    """Weights before and after one SGD step (no momentum) of a fresh LeNet-300-100 on a fixed batch, and the plain
    gradient of the loss at the start."""
    import keras
    import tensorflow as tf

    from models import build_model
    from models import optim

    train = compose("model=lenet300", f"train.optimizer.lr={lr}", "train.optimizer.momentum=0.0",
                    *train_overrides).train
    model = build_model("lenet300", "native", (8, 8, 1), 10, seed=0)
    optimizer = optim.make_optimizer(train)
    optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    x, y = tf.constant(rng.random((16, 8, 8, 1), np.float32)), tf.constant(rng.integers(0, 10, 16))
    with tf.GradientTape() as tape:
        loss = keras.losses.SparseCategoricalCrossentropy()(y, model(x, training=True))
    plain = tape.gradient(loss, model.trainable_variables)
    seen = optim.with_l2(plain, model.trainable_variables, optim.coupled_l2(train.optimizer))
    before = [v.numpy().copy() for v in model.trainable_variables]
    optimizer.apply_gradients(zip(seen, model.trainable_variables))
    after = [v.numpy() for v in model.trainable_variables]
    return before, [g.numpy() for g in plain], [g.numpy() for g in seen], after


def test_cifar_recipe_is_sgd_with_coupled_l2():
    train = compose("model=resnet18", "dataset=cifar10").train
    assert (train.optimizer.name, train.optimizer.lr, train.optimizer.momentum, train.batch_size) == \
        ("sgd", 0.1, 0.9, 128)
    assert (train.optimizer.weight_decay, train.optimizer.weight_decay_mode, train.schedule.name) == \
        (5e-4, "coupled", "cosine")


def test_coupled_l2_adds_wd_times_w_to_the_gradient():
    wd = 5e-4
    before, plain, seen, after = _one_step(["train.optimizer.weight_decay=5e-4",
                                            "train.optimizer.weight_decay_mode=coupled"])
    for w, g, s, w1 in zip(before, plain, seen, after):
        np.testing.assert_array_equal(s, g + np.float32(wd) * w)     # the gradient includes wd * w, exactly
        np.testing.assert_allclose(w1, w - 0.1 * (g + wd * w), rtol=0, atol=1e-7)
    kernel = int(np.argmax([w.size for w in before]))  # fc1/kernel: weights far from 0, so wd * w is visible
    assert np.abs(seen[kernel] - plain[kernel]).max() > 1e-6


@pytest.mark.parametrize("overrides", [["train.optimizer.weight_decay=0.0"],
                                       ["train.optimizer.weight_decay=5e-4",
                                        "train.optimizer.weight_decay_mode=decoupled"]])
def test_no_l2_in_the_gradient_unless_coupled(overrides):
    before, plain, seen, after = _one_step(overrides)
    for g, s in zip(plain, seen):
        np.testing.assert_array_equal(s, g)
    if "decoupled" in overrides[-1]:  # Keras' decay instead: w - lr * wd * w, then the plain SGD step
        for w, g, w1 in zip(before, plain, after):
            np.testing.assert_allclose(w1, w * (1 - 0.1 * 5e-4) - 0.1 * g, rtol=0, atol=1e-7)


def test_unknown_weight_decay_mode_is_refused():
    from models import optim

    with pytest.raises(ValueError, match="weight_decay_mode='l1' is not one of coupled, decoupled"):
        optim.make_optimizer(compose("train.optimizer.weight_decay_mode=l1").train)


def test_the_trainer_step_applies_coupled_l2(workdir, tmp_path):
    """The compiled training step of a cell, not only optim.with_l2: one SGD step (no momentum) of LeNet-300-100 on
    the cell's first batch moves every weight by -lr * (g + wd * w)."""
    import keras
    import tensorflow as tf

    from models import datasets
    from orchestrator.config.cell import resolve
    from orchestrator.tracking.tracker import Tracker
    from orchestrator.cell.trainer import _Run

    wd, lr = 0.01, 0.05
    cfg = resolve(workdir.cfg("mult=native", "train.optimizer.momentum=0.0", f"train.optimizer.weight_decay={wd}"))
    run = _Run(cfg, "test", tmp_path / "cell", Tracker(workdir.uri, "amdnn", "test", tmp_path / "cell"))
    _, x, y = next(iter(datasets.batches(run.data, run.batch_size, 0, 0)))
    variables = run.model.trainable_variables
    before = [v.numpy().copy() for v in variables]
    with tf.GradientTape() as tape:
        loss = keras.losses.SparseCategoricalCrossentropy()(tf.constant(y), run.model(tf.constant(x), training=True))
    plain = [g.numpy() for g in tape.gradient(loss, variables)]
    run.steps.train_step(x, y, lr)  # the TensorFlow engine's step, as the trainer calls it
    for w, g, v in zip(before, plain, variables):
        np.testing.assert_allclose(v.numpy(), w - lr * (g + wd * w), rtol=0, atol=2e-7)
    kernel = int(np.argmax([w.size for w in before]))
    assert np.abs(variables[kernel].numpy() - (before[kernel] - lr * plain[kernel])).max() > 1e-6  # not without L2
