"""The optimizer updates of the torch engine with the learning rate in a device tensor, so that a step captured as a
CUDA graph replays with each step's rate.

Keras' torch optimizers take the rate as a Python number (`torch._foreach_add_(..., alpha=-lr)`): read from a GPU
variable that is a device-to-host copy and a wait every step, and fixed for good inside a captured graph. These
updates are Keras' own formulas (keras/src/backend/torch/optimizers: SGD with momentum and Nesterov, Adam, the
decoupled weight decay of the base optimizer) written with the rate as a 0-dim tensor, on Keras' own optimizer
variables (momentums, velocities, iterations), so checkpoints hold them as they hold the TensorFlow engine's.
"""
from __future__ import annotations

from typing import Callable

import torch


def for_optimizer(optimizer, variables: list) -> Callable[[list, torch.Tensor], None]:
    """update(grads, lr) applying one step of the built Keras `optimizer` to `variables` (its trainable variables):
    in place, no host synchronisation, capturable."""
    kind = type(optimizer).__name__
    weights = [v.value for v in variables]
    index = [optimizer._get_variable_index(v) for v in variables]
    decay = optimizer.weight_decay  # None unless train.optimizer.weight_decay_mode=decoupled
    iterations = optimizer.iterations.value

    def weight_decay(lr: torch.Tensor) -> None:
        if decay:
            torch._foreach_mul_(weights, 1.0 - decay * lr)

    if kind == "SGD":
        momentum, nesterov = float(optimizer.momentum), bool(optimizer.nesterov)
        bufs = [optimizer.momentums[i].value for i in index] if momentum else []

        @torch.no_grad()
        def sgd(grads: list, lr: torch.Tensor) -> None:
            weight_decay(lr)
            step = torch._foreach_mul(grads, -lr)          # -lr * g
            if momentum:
                torch._foreach_mul_(bufs, momentum)
                torch._foreach_add_(bufs, step)            # m = momentum * m - lr * g
                if nesterov:
                    torch._foreach_add_(weights, step)
                    torch._foreach_add_(weights, bufs, alpha=momentum)
                else:
                    torch._foreach_add_(weights, bufs)
            else:
                torch._foreach_add_(weights, step)
            iterations.add_(1)

        return sgd
    if kind == "Adam":
        beta_1, beta_2, epsilon = float(optimizer.beta_1), float(optimizer.beta_2), float(optimizer.epsilon)
        if optimizer.amsgrad:
            raise ValueError("the torch engine's Adam has no amsgrad (train.optimizer offers none)")
        ms = [optimizer._momentums[i].value for i in index]
        vs = [optimizer._velocities[i].value for i in index]

        @torch.no_grad()
        def adam(grads: list, lr: torch.Tensor) -> None:
            weight_decay(lr)
            t = (iterations + 1).to(lr.dtype)
            alpha = lr * torch.sqrt(1 - beta_2 ** t) / (1 - beta_1 ** t)
            torch._foreach_mul_(ms, beta_1)
            torch._foreach_add_(ms, grads, alpha=1 - beta_1)
            torch._foreach_mul_(vs, beta_2)
            torch._foreach_add_(vs, torch._foreach_mul(grads, grads), alpha=1 - beta_2)
            torch._foreach_add_(weights, torch._foreach_div(torch._foreach_mul(ms, alpha),
                                                            torch._foreach_add(torch._foreach_sqrt(vs), epsilon)),
                                alpha=-1)
            iterations.add_(1)

        return adam
    raise ValueError(f"the torch engine has no update for the optimizer {kind} (models/optim.py OPTIMIZERS: sgd, adam)")
