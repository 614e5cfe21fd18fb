"""Optimizers and learning-rate schedules: the one list of choices for train.optimizer.name / train.schedule.name.

The learning rate is computed in Python for every global step (a pure function of the step), so a resumed run uses
exactly the rate an uninterrupted one would, whatever the optimizer's own state says.

Weight decay comes in the two forms of WEIGHT_DECAY_MODES. "coupled" is L2 regularisation as the published recipes
use it (PyTorch's SGD weight_decay): the gradient of every trainable variable gets weight_decay * w added before
the optimizer sees it (`with_l2`), so momentum accumulates it. "decoupled" is Keras 3's optimizer weight_decay
(AdamW's w -= lr * wd * w); under SGD with momentum 0.9 the same number decays about ten times less.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping


WEIGHT_DECAY_MODES = ("coupled", "decoupled")


def _decoupled_weight_decay(opt: Mapping[str, Any]) -> float | None:
    """The Keras optimizer's own (decoupled) weight_decay: None unless weight_decay_mode is "decoupled"."""
    mode = opt.get("weight_decay_mode", "coupled")
    if mode not in WEIGHT_DECAY_MODES:
        raise ValueError(f"train.optimizer.weight_decay_mode={mode!r} is not one of {', '.join(WEIGHT_DECAY_MODES)}")
    return (float(opt.get("weight_decay", 0.0)) or None) if mode == "decoupled" else None


def coupled_l2(opt: Mapping[str, Any]) -> float:
    """The L2 coefficient that `with_l2` adds to the gradients (0.0 unless weight_decay_mode is "coupled")."""
    return float(opt.get("weight_decay", 0.0)) if opt.get("weight_decay_mode", "coupled") == "coupled" else 0.0


def with_l2(grads: list, variables: list, l2: float) -> list:
    """grad + l2 * w for every (grad, variable): the gradient of loss + l2/2 * sum(w^2) (coupled weight decay)."""
    if not l2:
        return grads
    return [g + l2 * v for g, v in zip(grads, variables)]


def _sgd(opt: Mapping[str, Any]):
    import keras  # Keras only where an optimizer is made: validating a config reads OPTIMIZERS without it

    return keras.optimizers.SGD(learning_rate=float(opt["lr"]), momentum=float(opt.get("momentum", 0.0)),
                                nesterov=bool(opt.get("nesterov", False)), weight_decay=_decoupled_weight_decay(opt))


def _adam(opt: Mapping[str, Any]):
    import keras  # as in _sgd

    return keras.optimizers.Adam(learning_rate=float(opt["lr"]), weight_decay=_decoupled_weight_decay(opt))


OPTIMIZERS: dict[str, Callable] = {"sgd": _sgd, "adam": _adam}


def _constant(lr: float, step: int, total: int, steps_per_epoch: int, sched: Mapping[str, Any]) -> float:
    return lr


def _cosine(lr: float, step: int, total: int, steps_per_epoch: int, sched: Mapping[str, Any]) -> float:
    # Half a cosine from lr at step 0 to 0 after the last step.
    return lr * 0.5 * (1.0 + math.cos(math.pi * min(step, total) / max(total, 1)))


def _step(lr: float, step: int, total: int, steps_per_epoch: int, sched: Mapping[str, Any]) -> float:
    epoch = step // max(steps_per_epoch, 1)
    return lr * float(sched.get("gamma", 0.1)) ** (epoch // max(int(sched.get("step_epochs", 30)), 1))


SCHEDULES: dict[str, Callable] = {"constant": _constant, "cosine": _cosine, "step": _step}


def make_optimizer(train: Mapping[str, Any]):
    """A fresh Keras 3 optimizer for cfg.train."""
    return OPTIMIZERS[train["optimizer"]["name"]](train["optimizer"])


def learning_rate(train: Mapping[str, Any], step: int, steps_per_epoch: int) -> float:
    """The learning rate of global step `step` (0-based)."""
    total = int(train["epochs"]) * steps_per_epoch
    return SCHEDULES[train["schedule"]["name"]](float(train["optimizer"]["lr"]), step, total, steps_per_epoch,
                                                train["schedule"])
