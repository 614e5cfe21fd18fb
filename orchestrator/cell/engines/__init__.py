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

Each engine's module answers the same names, which module(engine) finds (the one place an engine's name leads to its
code), so that no caller branches on the engine:

    start(seed)                       the engine (above), seeded and deterministic
    gpu_name()                        the GPU it trains on, "NAME (xN)" for N of them; None where it sees none
    ops_build(simulated)              the ops build the cell used (its cache folder name), or NATIVE_BUILD
    gpu_facts(simulated)              the CUDA its framework and the ops' GPU kernels were built with; {} without a GPU
    gpus_seen()                       (how many GPUs the framework sees, what orchestrator.cell.devices says of it
                                      when they are fewer than asked: name, version, CUDA, libraries, warnings)
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol

import numpy as np

from models.engines import select


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


def module(engine: str) -> ModuleType:
    """`engine`'s module (tf_engine or torch_engine), with `engine` made Keras' backend first (refused if Keras already
    runs another). TensorFlow and torch are imported here only: the supervising parent never loads either, a torch
    cell's process never loads TensorFlow."""
    select(engine)
    if engine == "torch":
        from orchestrator.cell.engines import torch_engine  # torch only in a torch cell's process

        return torch_engine
    from orchestrator.cell.engines import tf_engine  # TensorFlow only in its cells' processes (select refused others)

    return tf_engine


def start(engine: str, seed: int) -> Engine:
    """Select Keras' backend `engine` (refused if Keras already runs another), seed it and make its kernels
    deterministic."""
    return module(engine).start(seed)
