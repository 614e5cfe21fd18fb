"""One training epoch of CIFAR-10-shaped data per (model, multiplier) on a GPU, through Keras' torch backend.

    python bench/gpu_epoch.py [--models resnet18,resnet34,resnet50] [--modes native,acc32,am16,am32,mit16]
                              [--steps N] [--json out.json]

The project's own Keras models (models.build_model) train as a cell would: 50,000 images 32x32x3 and 10 classes
(synthetic, made on the GPU: the time of a step does not depend on pixel values), batch 128 (390 full steps, the
last partial batch dropped as models.datasets does), the CIFAR recipe of conf/train/cifar.yaml (SGD momentum 0.9,
lr 0.1 on a cosine schedule, coupled L2 5e-4 added to every gradient, models.optim.with_l2), every product of
every AM layer forward and backward through the multiplier (ops.keras_ops -> ops.torch_ops -> the CUDA kernels).
The pad-and-crop / flip augmentation is left out: it is the same per-batch cost in every mode and would only shift
the ratios towards 1.

For every model: "native" is Keras' own Conv2D/Dense on cuDNN/cuBLAS in fp32 (TF32 off, cudnn.benchmark on), the
reference of the ratios; "native-tf32" the same with TF32 (TensorFlow's default on Ampere and later) for context.
Each (model, mode) warms up for a few steps, then one epoch (or --steps steps, scaled to the epoch) is timed with
the GPU synchronised at both ends; then 10 more steps run under torch.profiler for the GPU's own time per step
(the time some kernel ran), which shows how much of a step is the host's Python (Keras' torch backend runs eagerly,
layer by layer) and what a step costs where the framework runs it as one graph (TensorFlow's tf.function). The
kernels are verified by tests/device before they are timed here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if os.environ.setdefault("KERAS_BACKEND", "torch") != "torch":
    sys.exit(f"bench/gpu_epoch.py runs on Keras' torch backend; KERAS_BACKEND is {os.environ['KERAS_BACKEND']!r}")

import keras  # noqa: E402
import torch  # noqa: E402
from torch.autograd import DeviceType  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cifar_recipe import RECIPE  # noqa: E402
from models import build_model  # noqa: E402
from models import optim  # noqa: E402

IMAGES, SHAPE, CLASSES = 50_000, (32, 32, 3), 10
WARMUP_STEPS = 5
PROFILED_STEPS = 10


def synthetic_cifar(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator(device=device).manual_seed(0)
    pixels = torch.randint(0, 256, (IMAGES, *SHAPE), generator=generator, device=device, dtype=torch.uint8)
    labels = torch.randint(0, CLASSES, (IMAGES,), generator=generator, device=device)
    return pixels.float().div_(255.0), labels


class Epoch:
    """One model under one multiplier with its optimizer, stepping over the data in a seeded order (a new order per
    epoch); `recipe` a conf/train mapping (default: the CIFAR recipe)."""

    def __init__(self, model_name: str, mode: str, images: torch.Tensor, labels: torch.Tensor, recipe=None,
                 classes: int = CLASSES):
        multiplier = "native" if mode.startswith("native") else mode
        self.recipe = recipe or RECIPE
        self.model = build_model(model_name, multiplier, tuple(images.shape[1:]), classes, seed=0)
        self.optimizer = optim.make_optimizer(self.recipe)
        self.optimizer.build(self.model.trainable_variables)
        # No host-device synchronisation inside a step, so the host runs ahead of the GPU as a compiled graph would
        # (torch.cuda.set_sync_debug_mode, 2026-11-24: Keras' torch backend synchronised four times a step, a step
        # then costing about host plus GPU time): the learning rate is a Python float read through a
        # callable (assigning a float to the optimizer's variable copies it to the GPU and waits, and torch SGD reads
        # a variable back to the host for its foreach alpha), and the mean over the batch is the sum divided by the
        # batch size as a float (the "sum_over_batch_size" reduction copies the divisor to the GPU each step).
        self.learning_rate = float(self.recipe["optimizer"]["lr"])
        self.optimizer.learning_rate = lambda: self.learning_rate
        self.loss = keras.losses.SparseCategoricalCrossentropy(from_logits=False, reduction="sum")
        # The update without Keras' iteration counter, whose assign_add(1) copies a Python 1 to the GPU and waits: the
        # last synchronisation of a step. The schedule is the bench's own (the learning rate above); SGD with momentum
        # has no other use for the counter.
        self.apply_update = getattr(self.optimizer, "_backend_apply_gradients", self.optimizer.apply)
        self.l2 = optim.coupled_l2(self.recipe["optimizer"])
        self.images, self.labels = images, labels
        self.batch = self.recipe["batch_size"]
        self.steps_per_epoch = len(images) // self.batch
        self.generator = torch.Generator(device=images.device).manual_seed(1)
        self.step_index = 0

    def step(self) -> torch.Tensor:
        position = self.step_index % self.steps_per_epoch
        if position == 0:
            self.order = torch.randperm(len(self.images), device=self.images.device, generator=self.generator)
        rows = self.order[position * self.batch:(position + 1) * self.batch]
        trainable = self.model.trainable_variables
        self.model.zero_grad()
        loss = self.loss(self.labels[rows], self.model(self.images[rows], training=True)) / float(len(rows))
        loss.backward()
        grads = optim.with_l2([v.value.grad for v in trainable], [v.value for v in trainable], self.l2)
        self.learning_rate = optim.learning_rate(self.recipe, self.step_index, self.steps_per_epoch)
        with torch.no_grad():
            self.apply_update(grads, trainable)
        self.step_index += 1
        return loss

    def timed(self, steps: int) -> tuple[float, float]:
        """(seconds for `steps` steps, the last step's loss)."""
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            loss = self.step()
        torch.cuda.synchronize()
        return time.perf_counter() - start, float(loss.detach())


def gpu_ms_per_step(run: Epoch, steps: int) -> float:
    """The GPU's own time per step: the time some CUDA kernel was running (the union of the kernels' intervals from
    CUPTI, torch.profiler), without the host's Python and launch overhead: the floor of a step in a framework that
    runs the step as one compiled graph. A union, not a sum: kernels on side streams run beside others (the input
    gradient's stride phases, the filter gradient beside the input gradient), and their sum counted the shared time
    twice (am16's ResNet-18 step: 65.0 ms summed, 2026-11-26)."""

    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(steps):
            run.step()
        torch.cuda.synchronize()
    return busy_us(
        (event.time_range.start, event.time_range.end)
        for event in profiler.events()
        if event.device_type == DeviceType.CUDA
    ) / 1000 / steps


def busy_us(intervals) -> float:
    """Length of the union of (start, end) intervals."""
    total, covered_to = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > covered_to:
            total += end - max(start, covered_to)
            covered_to = end
    return total


def measure(model_name: str, mode: str, images, labels, steps: int | None) -> dict:
    tf32 = mode == "native-tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    run = Epoch(model_name, mode, images, labels)
    run.timed(WARMUP_STEPS)
    timed_steps = steps or run.steps_per_epoch
    seconds, loss = run.timed(timed_steps)
    epoch = seconds * run.steps_per_epoch / timed_steps
    return {"model": model_name, "mode": mode, "timed_steps": timed_steps, "epoch_s": epoch,
            "ms_per_step": 1000 * seconds / timed_steps, "gpu_ms_per_step": gpu_ms_per_step(run, PROFILED_STEPS),
            "last_loss": loss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,resnet34,resnet50")
    parser.add_argument("--modes", default="native,native-tf32,acc32,am16,am32,mit16")
    parser.add_argument("--steps", type=int, default=None, help="time this many steps and scale to an epoch")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/gpu_epoch.py needs a CUDA GPU")
    torch.backends.cudnn.benchmark = True
    keras.utils.set_random_seed(0)
    modes = args.modes.split(",")
    if "native" not in modes:
        modes.insert(0, "native")  # the reference of every ratio
    images, labels = synthetic_cifar(torch.device("cuda"))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, keras {keras.__version__} "
          f"({keras.backend.backend()}), {IMAGES} images {SHAPE}, batch {RECIPE['batch_size']}", flush=True)
    rows = []
    for model_name in args.models.split(","):
        native = native_gpu = None
        for mode in modes:
            row = measure(model_name, mode, images, labels, args.steps)
            native = native or row["epoch_s"]
            native_gpu = native_gpu or row["gpu_ms_per_step"]
            row["ratio_to_native"] = row["epoch_s"] / native
            row["gpu_ratio_to_native"] = row["gpu_ms_per_step"] / native_gpu
            rows.append(row)
            print(f"{model_name:9s} {mode:12s} {row['epoch_s']:8.2f} s/epoch  {row['ms_per_step']:7.2f} ms/step  "
                  f"x{row['ratio_to_native']:.2f} native | GPU {row['gpu_ms_per_step']:7.2f} ms/step "
                  f"x{row['gpu_ratio_to_native']:.2f}  (loss {row['last_loss']:.3f}, {row['timed_steps']} steps)",
                  flush=True)
            torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "keras": keras.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
