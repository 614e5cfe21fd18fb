"""The per-engine part of a cell's training: the step, the prediction, the seeds and determinism, per Keras backend.

    engine = engines.start(cell.engine, seed)        # after models.engines.select(): seeds, deterministic kernels
    steps = engine.compile(model, optimizer, l2, batch_size)
    pending = steps.train_step(x, y, lr)                      # numpy batch in; the step is launched
    loss, grad_norm, correct = pending.result()               # Python numbers (waits for the step)
    classes = steps.predict(x)                                # numpy [batch] of class indices
    engine.uses_gpu(); engine.path_counts()                 # GEMM work by kernel path, as this engine counts it

Everything else of a cell's life (checkpoints, rollbacks, collapse handling, resume, energy, tracking) is written once
in orchestrator.cell.trainer and reads the model's and optimizer's Keras variables, which both backends share.
The trainer reads a step's numbers after it has launched the next step, so a GPU never idles while the host
prepares a batch.
tensorflow: a tf.function step (orchestrator.cell.engines.tf_engine); torch: an eager step on the CPU and the same
step captured once as a CUDA graph on a GPU (orchestrator.cell.engines.torch_engine).
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from models.engines import ENGINES, select


class PendingStep(Protocol):
    def result(self) -> tuple[float, float, int]: ...


class Steps(Protocol):
    def train_step(self, x: np.ndarray, y: np.ndarray, lr: float) -> PendingStep: ...

    def predict(self, x: np.ndarray) -> np.ndarray: ...


class Engine(Protocol):
    name: str

    def uses_gpu(self) -> bool: ...

    def path_counts(self) -> dict[str, int]: ...

    def compile(self, model: Any, optimizer: Any, l2: float, batch_size: int) -> Steps: ...


def start(engine: str, seed: int) -> Engine:
    """Select Keras' backend `engine` (refused if Keras already runs another), seed it and make its kernels
    deterministic. TensorFlow and torch are imported here only: the supervising parent never loads either."""
    select(engine)
    if engine == "torch":
        from orchestrator.cell.engines.torch_engine import TorchEngine  # torch only in a torch cell's process

        return TorchEngine(seed)
    assert engine in ENGINES
    from orchestrator.cell.engines.tf_engine import TensorFlowEngine  # TensorFlow only in its cells' processes

    return TensorFlowEngine(seed)
