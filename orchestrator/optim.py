"""Optimizers and learning-rate schedules: the one list of choices for train.optimizer.name / train.schedule.name.

The learning rate is computed in Python for every global step (a pure function of the step), so a resumed run uses
exactly the rate an uninterrupted one would, whatever the optimizer's own state says.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping


def _sgd(opt: Mapping[str, Any]):
    import keras

    return keras.optimizers.SGD(learning_rate=float(opt["lr"]), momentum=float(opt.get("momentum", 0.0)),
                                nesterov=bool(opt.get("nesterov", False)),
                                weight_decay=float(opt.get("weight_decay", 0.0)) or None)


def _adam(opt: Mapping[str, Any]):
    import keras

    return keras.optimizers.Adam(learning_rate=float(opt["lr"]),
                                 weight_decay=float(opt.get("weight_decay", 0.0)) or None)


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
