"""The torch engine: Keras 3 on its torch backend, the ops through their PyTorch binding.

On the CPU a step is the Keras model called eagerly. On a GPU the same step is captured once as a CUDA graph and
replayed with each batch copied into its input buffers and each step's learning rate into a device tensor
(orchestrator.cell.engines.torch_update): Keras' torch backend called eagerly spends about 40 ms of host Python per
ResNet-18 step for 16 ms of GPU work (bench/gpu_step_paths.py, docs/performance.md), a replay costs one launch.
Warming up and capturing run the step: every model and optimizer variable is put back afterwards, so capturing
changes no bits of the run.

The host never waits for a step it has just launched: train_step returns a PendingStep whose numbers (loss, gradient
norm, hits) are copied into pinned host memory behind the step and read when the trainer asks, after it has launched
the next step (orchestrator.cell.trainer). Reading every step at once cost a wait per step in which the GPU idled
while the host prepared the next batch (docs/performance.md, "A cell's steps on a GPU").

Determinism: torch.use_deterministic_algorithms (cuDNN's deterministic algorithms, no autotuning, no TF32;
cuBLAS with a fixed workspace, set by models.engines.select), Keras' seeds from the cell's seed; a replay gives the bits of the eager step.

What a run records of torch's devices and the ops build it loaded: gpu_name, ops_build, gpu_facts below
(orchestrator.cell.run_facts asks).
"""
from __future__ import annotations

import random
import warnings
from pathlib import Path
from typing import Any

import keras  # the engine's backend was selected (models.engines.select) before this module is imported
import numpy as np
import torch

from models import optim
from ops import torch_ops
from ops.build.torch_library import load

from orchestrator.cell.engines.torch_update import for_optimizer

WARMUP = 3  # eager steps on a side stream before capture, as torch.cuda.graphs asks
IN_FLIGHT = 4  # pinned result slots: the trainer reads a step's numbers before it launches the second step after it
NATIVE_BUILD = "none (mult=native: torch's own ops)"  # the ops build a cell without a simulated multiplier records


class PendingStep:
    """A launched step's (loss, gradient norm, hits): result() waits for the step and gives Python numbers."""

    def __init__(self, numbers: torch.Tensor, done: torch.cuda.Event | None = None):
        self.numbers, self.done = numbers, done  # [3] float32: loss, grad_norm, correct (exact below 2**24)

    def result(self) -> tuple[float, float, int]:
        if self.done is not None:
            self.done.synchronize()
        loss, grad_norm, correct = self.numbers.tolist()
        return loss, grad_norm, int(correct)


def _seed(seed: int) -> None:
    """keras.utils.set_random_seed(seed) without its tf.random.set_seed: where TensorFlow is installed that call
    imports it into the torch cell's process (several seconds, hundreds of MB, and its CUDA probing on a GPU node) to
    seed a framework the cell never runs. The rest is Keras' own steps (keras/src/utils/rng_utils.py)."""
    from keras.src.backend.common import global_state  # Keras' seed state: no public setter without the TF call
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def start(seed: int) -> "TorchEngine":
    """The torch engine, seeded with `seed`, its kernels deterministic (the backend selected already)."""
    return TorchEngine(seed)


def gpu_name() -> str | None:
    """The GPU torch trains on, "NAME (xN)" for N of them; None where it sees none."""
    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    return torch.cuda.get_device_name(0) + (f" (x{count})" if count > 1 else "")


def ops_build(simulated: bool) -> str:
    """The ops' PyTorch binding the run used: its cache folder name (CPU target, torch, [CUDA], key)."""
    return Path(load().library).parent.name if simulated else NATIVE_BUILD  # loaded already by the AM layers


def gpus_seen() -> tuple[int, dict[str, Any]]:
    """How many GPUs torch sees, its build, and why CUDA did not start (orchestrator.cell.devices' message where they
    are too few)."""
    with warnings.catch_warnings(record=True) as said:  # torch warns, once, why CUDA did not initialise
        warnings.simplefilter("always")
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return seen, {"name": "torch", "version": torch.__version__, "cuda": torch.version.cuda, "libraries": True,
                  "said": [str(w.message) for w in said]}


def gpu_facts(simulated: bool) -> dict[str, str]:
    """The CUDA torch was built with, and the CUDA release and architectures of the ops' GPU kernels; {} where torch
    sees no GPU."""
    if not torch.cuda.is_available():
        return {}
    facts = {"amdnn.torch_cuda": str(torch.version.cuda)}
    if simulated:
        info = load()
        facts["amdnn.ops_cuda"] = f"CUDA {info.cuda} for {info.cuda_arch}"
    return facts


class TorchEngine:
    name = "torch"

    def __init__(self, seed: int):
        if keras.backend.backend() != "torch":
            raise RuntimeError(f"the torch engine needs Keras' torch backend; Keras runs {keras.backend.backend()}")
        _seed(seed)
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        self.device = torch.device(keras.src.backend.torch.core.get_device())

    def uses_gpu(self) -> bool:
        return self.device.type == "cuda"

    def path_counts(self) -> dict[str, int]:
        """On the CPU: GEMM calls and products by kernel path (fast_calls, generic_calls, fast_products,
        generic_products), as the TensorFlow engine counts them. On a GPU: the k-tile steps the CUDA kernels ran by
        path (fast_tiles, generic_tiles). A generic one means operands outside the fast formulas' range."""
        if self.device.type != "cuda":
            return torch_ops.cpu_path_counts()
        fast, generic = torch_ops.gpu_path_counts()
        return {"fast_tiles": fast, "generic_tiles": generic}

    def compile(self, model, optimizer, l2: float, batch_size: int) -> "TorchSteps":
        return TorchSteps(model, optimizer, l2, batch_size, self.device)


def _logits(probs: torch.Tensor) -> torch.Tensor:
    """The logits under the models' final softmax, which Keras' softmax keeps on its output (`_keras_logits`).

    The loss is taken from them, as the TensorFlow engine's Keras loss does: Keras' torch backend takes the cross-entropy
    of the probabilities clipped to [1e-7, 1 - 1e-7], whose gradient is zero wherever a wrong class has saturated the
    softmax, and a network that saturates early stays there (ResNet-50 on Fashion-MNIST, lr 0.1: training loss 11.3,
    about 0.7 x -log(1e-7), and 29 % accuracy for 3 epochs, docs/gpu-runs.md)."""
    logits = getattr(probs, "_keras_logits", None)
    if logits is None:
        raise TypeError("the torch engine needs a model whose output is Keras' softmax activation (its logits are "
                        "kept on the output for the loss); this model's output carries none")
    return logits


class TorchSteps:
    def __init__(self, model, optimizer, l2: float, batch_size: int, device: torch.device):
        self.model, self.l2, self.batch_size, self.device = model, l2, batch_size, device
        self.trainable = model.trainable_variables
        self.state = [v.value for v in model.variables + optimizer.variables]  # what a step may change
        self.update = for_optimizer(optimizer, self.trainable)
        self.lr = torch.zeros((), dtype=torch.float32, device=device)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static: tuple | None = None  # (x, y) input buffers and the [3] numbers the graph writes
        if device.type == "cuda":
            self.slots = [torch.zeros(3, dtype=torch.float32, pin_memory=True) for _ in range(IN_FLIGHT)]
            self.events = [torch.cuda.Event() for _ in range(IN_FLIGHT)]
            self.launched = 0

    def _step(self, x: torch.Tensor, y: torch.Tensor):
        self.model.zero_grad(set_to_none=True)
        probs = self.model(x, training=True)                        # [batch, classes]
        # The sum over the batch divided by the batch size as a Python number: the sum the engine has always divided,
        # so a step's bits do not depend on how a reduction divides.
        loss = torch.nn.functional.cross_entropy(_logits(probs), y.long(), reduction="sum") / float(len(x))
        if self.model.losses:
            loss = loss + sum(self.model.losses)
        loss.backward()
        grads = optim.with_l2([v.value.grad for v in self.trainable], [v.value for v in self.trainable], self.l2)
        with torch.no_grad():
            grad_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            self.update(grads, self.lr)
            correct = (torch.argmax(probs, dim=-1) == y).sum()
            return torch.stack([loss.detach(), grad_norm, correct.to(torch.float32)])  # one copy to the host

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> None:
        saved = [t.detach().clone() for t in self.state]
        static_x, static_y = x.clone(), y.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                self._step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self._step(static_x, static_y)
        with torch.no_grad():
            for t, s in zip(self.state, saved):
                t.copy_(s)
        self.graph, self.static = graph, (static_x, static_y, outputs)

    def train_step(self, x: np.ndarray, y: np.ndarray, lr: float) -> PendingStep:
        """Launch one step; the host does not wait for it (PendingStep.result() does)."""
        xs = torch.from_numpy(np.ascontiguousarray(x)).to(self.device, non_blocking=True)
        ys = torch.from_numpy(np.ascontiguousarray(y)).to(self.device, non_blocking=True)
        self.lr.fill_(lr)
        if self.device.type != "cuda":
            return PendingStep(self._step(xs, ys))
        if len(x) != self.batch_size:
            numbers = self._step(xs, ys)
        else:
            if self.graph is None:
                self._capture(xs, ys)
            static_x, static_y, numbers = self.static
            static_x.copy_(xs)
            static_y.copy_(ys)
            self.graph.replay()
        slot = self.launched % IN_FLIGHT
        self.launched += 1
        self.events[slot].synchronize()  # that slot's last reader is long done: the trainer reads one step behind
        self.slots[slot].copy_(numbers, non_blocking=True)
        self.events[slot].record()
        return PendingStep(self.slots[slot], self.events[slot])

    def predict(self, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            probs = self.model(torch.from_numpy(np.ascontiguousarray(x)).to(self.device), training=False)
            return torch.argmax(probs, dim=-1).cpu().numpy()
