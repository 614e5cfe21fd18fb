"""The TensorFlow engine: the cell's step as one tf.function (its variables, seeds and op determinism TensorFlow's),
and what a run records of TensorFlow's devices and the ops build it loaded (orchestrator.cell.run_facts asks)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

import ops
from models import optim
from ops.tf_binding.library import library, loaded_build
from orchestrator.environment import importable

NATIVE_BUILD = "none (mult=native: TensorFlow's own ops)"  # the ops build a cell without a simulated multiplier records


def start(seed: int) -> "TensorFlowEngine":
    """The TensorFlow engine, seeded with `seed`, its ops deterministic."""
    return TensorFlowEngine(seed)


def gpu_name() -> str | None:
    """The GPU TensorFlow trains on, "NAME (xN)" for N of them; None where it sees none."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", gpus[0].name)
    return name + (f" (x{len(gpus)})" if len(gpus) > 1 else "")


def ops_build(simulated: bool) -> str:
    """The ops' TensorFlow library the run used: its cache folder name (CPU target, TensorFlow, [CUDA], key)."""
    if not simulated:
        return NATIVE_BUILD
    library()
    info = loaded_build()
    return Path(info.library).parent.name if info else "unknown"


def gpus_seen() -> tuple[int, dict[str, Any]]:
    """How many GPUs TensorFlow sees, and its build (orchestrator.cell.devices' message where they are too few)."""
    cuda = tf.sysconfig.get_build_info().get("cuda_version")
    return len(tf.config.list_physical_devices("GPU")), {
        "name": "TensorFlow", "version": tf.__version__, "cuda": cuda if tf.test.is_built_with_cuda() else None,
        # the CUDA 12 libraries the Linux wheel loads at run time: tensorflow[and-cuda]'s nvidia-* wheels
        "libraries": importable("nvidia.cudnn") and importable("nvidia.cuda_runtime"), "said": []}


def gpu_facts(simulated: bool) -> dict[str, str]:
    """The CUDA TensorFlow was built with, and the CUDA release and architectures of the ops' GPU kernels; {} where
    TensorFlow sees no GPU."""
    if not tf.config.list_physical_devices("GPU"):
        return {}
    facts = {"amdnn.tensorflow_cuda": str(tf.sysconfig.get_build_info().get("cuda_version", "?"))}
    if simulated:
        info = loaded_build()
        if info is not None:
            facts["amdnn.ops_cuda"] = f"CUDA {info.cuda} for {info.cuda_arch}"
    return facts


class TensorFlowEngine:
    name = "tensorflow"

    def __init__(self, seed: int):
        keras.utils.set_random_seed(seed)
        tf.config.experimental.enable_op_determinism()

    def uses_gpu(self) -> bool:
        return bool(tf.config.list_physical_devices("GPU"))

    def path_counts(self) -> dict[str, int]:
        """GEMM calls and products by CPU kernel path (fast_calls, generic_calls, fast_products, generic_products)."""
        return ops.path_counts()

    def compile(self, model, optimizer, l2: float, batch_size: int) -> "TensorFlowSteps":
        return TensorFlowSteps(model, optimizer, l2)


class TensorFlowSteps:
    def __init__(self, model, optimizer, l2: float):
        self.optimizer = optimizer
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=False)  # the models end in softmax

        @tf.function(jit_compile=False)  # the AM ops have no XLA kernels
        def train_step(x, y):
            with tf.GradientTape() as tape:
                probs = model(x, training=True)                     # [batch, classes]
                loss = loss_fn(y, probs)
                if model.losses:
                    loss = loss + tf.add_n(model.losses)
            grads = optim.with_l2(tape.gradient(loss, model.trainable_variables), model.trainable_variables, l2)
            grad_norm = tf.linalg.global_norm(grads)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(probs, axis=-1), y), tf.int64))
            return loss, grad_norm, correct

        @tf.function(jit_compile=False)
        def predict(x):
            return tf.argmax(model(x, training=False), axis=-1)  # [batch]

        self._train_step, self._predict = train_step, predict

    def train_step(self, x: np.ndarray, y: np.ndarray, lr: float) -> "TensorFlowPendingStep":
        self.optimizer.learning_rate = lr
        return TensorFlowPendingStep(*self._train_step(tf.constant(x), tf.constant(y)))

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._predict(tf.constant(x)).numpy()


class TensorFlowPendingStep:
    """A step's (loss, gradient norm, hits) as TensorFlow gives them; result() reads them (waiting on a GPU)."""

    def __init__(self, loss, grad_norm, correct):
        self.tensors = (loss, grad_norm, correct)

    def result(self) -> tuple[float, float, int]:
        loss, grad_norm, correct = self.tensors
        return float(loss), float(grad_norm), int(correct)
