"""Ways to run one training step of the project's Keras ResNets on a GPU through Keras' torch backend, timed against
a plain PyTorch loop of the same network and multiplier: what a torch engine for a cell can expect of each.

    python bench/gpu_step_paths.py [--models resnet18] [--modes native,am16] [--steps 40]

Per (model, mode), ms per step at batch 128 on CIFAR-shaped synthetic data already on the GPU (bench/gpu_epoch.py's
data and recipe: SGD momentum 0.9, coupled L2 5e-4):
    keras-eager   bench/gpu_epoch.py's step: the Keras model called eagerly, layer by layer (the host's Python is the
                  bound: ~66 ms a step for ~22 ms of GPU work, native, H200)
    keras-graph   the same step captured once as a CUDA graph (torch.cuda.graph) and replayed: the batch copied into
                  the graph's input buffers (the learning rate is fixed at capture here; a cell would keep it in a
                  device tensor updated before each replay)
    torch-plain   a plain PyTorch ResNet of the same shape (nn.Conv2d, or torch_ops.conv2d under a multiplier;
                  torch.optim.SGD with foreach), eager: the yardstick of issue 33 (a cell within 1.25x of it)
Each variant runs a few warm-up steps, then `--steps` timed steps with the GPU synchronised at both ends. The
kernels are verified by tests/device before they are timed here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if os.environ.setdefault("KERAS_BACKEND", "torch") != "torch":
    sys.exit("bench/gpu_step_paths.py runs on Keras' torch backend")

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_epoch import CLASSES, Epoch, synthetic_cifar  # noqa: E402
from models import optim  # noqa: E402
from models.resnet_depths import DEPTHS  # noqa: E402
from ops import torch_ops  # noqa: E402

WARMUP = 5


def timed(step, steps: int) -> float:
    """Milliseconds per step of `steps` calls of step(), the GPU synchronised at both ends."""
    for _ in range(WARMUP):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - start) / steps


def keras_graph_step(run: Epoch):
    """run.step captured as one CUDA graph; returns a step function that feeds the next batch and replays it."""
    batch = run.batch
    static_rows = torch.arange(batch, device=run.images.device)
    static_x = run.images[static_rows].clone()
    static_y = run.labels[static_rows].clone()
    trainable = run.model.trainable_variables

    def body():
        run.model.zero_grad(set_to_none=True)
        loss = run.loss(static_y, run.model(static_x, training=True)) / float(batch)
        loss.backward()
        grads = optim.with_l2([v.value.grad for v in trainable], [v.value for v in trainable], run.l2)
        with torch.no_grad():
            run.apply_update(grads, trainable)
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up outside capture, as torch.cuda.graphs asks
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    state = {"i": 0}

    def step():
        position = state["i"] % run.steps_per_epoch
        if position == 0:
            state["order"] = torch.randperm(len(run.images), device=run.images.device, generator=run.generator)
        rows = state["order"][position * batch:(position + 1) * batch]
        torch.index_select(run.images, 0, rows, out=static_x)
        torch.index_select(run.labels, 0, rows, out=static_y)
        graph.replay()
        state["i"] += 1

    return step


class AMConv(nn.Conv2d):
    """nn.Conv2d whose products go through the multiplier (torch_ops.conv2d), as in a plain PyTorch study."""

    def __init__(self, *args, multiplier: str = "native", **kwargs):
        super().__init__(*args, **kwargs)
        self.multiplier = multiplier

    def forward(self, x):
        if self.multiplier == "native":
            return super().forward(x)
        return torch_ops.conv2d(x, self.weight, stride=self.stride, padding=self.padding, multiplier=self.multiplier)


class Block(nn.Module):
    def __init__(self, cin, cout, stride, mult):
        super().__init__()
        self.c1 = AMConv(cin, cout, 3, stride, 1, bias=False, multiplier=mult)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = AMConv(cout, cout, 3, 1, 1, bias=False, multiplier=mult)
        self.b2 = nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(AMConv(cin, cout, 1, stride, 0, bias=False, multiplier=mult),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(torch.relu(self.b1(self.c1(x)))))
        return torch.relu(y + (x if self.short is None else self.short(x)))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, filters, stride, mult):
        super().__init__()
        cout = filters * self.expansion
        self.body = nn.Sequential(
            AMConv(cin, filters, 1, 1, 0, bias=False, multiplier=mult), nn.BatchNorm2d(filters), nn.ReLU(),
            AMConv(filters, filters, 3, stride, 1, bias=False, multiplier=mult), nn.BatchNorm2d(filters), nn.ReLU(),
            AMConv(filters, cout, 1, 1, 0, bias=False, multiplier=mult), nn.BatchNorm2d(cout))
        self.short = None
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(AMConv(cin, cout, 1, stride, 0, bias=False, multiplier=mult),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.short is None else self.short(x)))


def plain_resnet(model_name: str, mult: str, in_channels: int = 3, classes: int = CLASSES) -> nn.Module:
    """The CIFAR ResNet of models/resnet.py's shape (3x3 stem, four stages) as plain torch.nn modules."""
    kind, counts = DEPTHS[int(model_name.removeprefix("resnet"))]
    layers = [AMConv(in_channels, 64, 3, 1, 1, bias=False, multiplier=mult), nn.BatchNorm2d(64), nn.ReLU()]
    cin = 64
    for stage, (filters, count) in enumerate(zip((64, 128, 256, 512), counts)):
        for block in range(count):
            stride = 2 if stage and not block else 1
            if kind == "basic":
                layers.append(Block(cin, filters, stride, mult))
                cin = filters
            else:
                layers.append(Bottleneck(cin, filters, stride, mult))
                cin = filters * Bottleneck.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def torch_plain_step(model_name: str, mult: str, images, labels, classes: int = CLASSES):
    """One step of the plain PyTorch loop per call: images [N, H, W, C] and labels [N] on the GPU, batch 128 in a
    seeded order, channels-last memory, no host reads (bench/gpu_cell.py's yardstick too)."""
    model = plain_resnet(model_name, mult, in_channels=images.shape[-1], classes=classes).cuda().to(
        memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, foreach=True)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator(device=images.device).manual_seed(1)
    x_all = images.permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    state = {"i": 0}
    steps_per_epoch = len(images) // 128

    def step():
        position = state["i"] % steps_per_epoch
        if position == 0:
            state["order"] = torch.randperm(len(images), device=images.device, generator=generator)
        rows = state["order"][position * 128:(position + 1) * 128]
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x_all[rows]), labels[rows])
        loss.backward()
        optimizer.step()
        state["i"] += 1

    return step


def same_bits(model_name: str, mode: str, images, labels, steps: int = 12) -> bool:
    """Whether `steps` replays of the captured step leave every model and optimizer variable bit-identical to as many
    eager steps from the same start (learning rate held at the recipe's, since the capture fixes it)."""
    optim_learning_rate = optim.learning_rate
    optim.learning_rate = lambda train, step, steps_per_epoch: float(train["optimizer"]["lr"])
    try:
        eager = Epoch(model_name, mode, images, labels)
        for _ in range(steps):
            eager.step()
        graphed = Epoch(model_name, mode, images, labels)
        state = [v.value.detach().clone() for v in graphed.model.variables + graphed.optimizer.variables]
        step = keras_graph_step(graphed)  # warms up and captures: moves the variables, put back below
        with torch.no_grad():
            for v, saved in zip(graphed.model.variables + graphed.optimizer.variables, state):
                v.value.copy_(saved)
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        pairs = zip(eager.model.variables + eager.optimizer.variables,
                    graphed.model.variables + graphed.optimizer.variables)
        return all(torch.equal(a.value.view(torch.int32) if a.value.dtype == torch.float32 else a.value,
                               b.value.view(torch.int32) if b.value.dtype == torch.float32 else b.value)
                   for a, b in pairs)
    finally:
        optim.learning_rate = optim_learning_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--modes", default="native,am16")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--check-bits", action="store_true", help="also: captured replays against eager steps, bits")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    images, labels = synthetic_cifar(torch.device("cuda"))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch 128, ms per step", flush=True)
    for model_name in args.models.split(","):
        for mode in args.modes.split(","):
            row = {}
            row["torch-plain"] = timed(torch_plain_step(model_name, mode, images, labels), args.steps)
            run = Epoch(model_name, mode, images, labels)
            row["keras-eager"] = timed(run.step, args.steps)
            try:
                row["keras-graph"] = timed(keras_graph_step(Epoch(model_name, mode, images, labels)), args.steps)
            except Exception as error:  # noqa: BLE001 - report why capture failed and go on
                print(f"  keras-graph {model_name} {mode}: capture failed: {type(error).__name__}: {error}"[:600],
                      flush=True)
            if args.check_bits:
                print(f"  {model_name} {mode}: graph replays bit-identical to eager steps: "
                      f"{same_bits(model_name, mode, images, labels)}", flush=True)
            plain = row["torch-plain"]
            print(f"{model_name:9s} {mode:7s} " + "  ".join(f"{k} {v:7.2f} (x{v / plain:.2f})" for k, v in row.items()),
                  flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
