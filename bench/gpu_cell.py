"""A cell's training steps on a GPU through the torch engine, timed against a plain PyTorch loop of the same network
and multiplier in the same run: what issue 33's "within 1.25x (am16, am32), 1.5x (native)" is measured by, and what
each of the engine's means buys.

    python bench/gpu_cell.py --data-dir DIR [--models resnet18,resnet34,resnet50] [--modes native,am16,am32]
                             [--steps 60] [--repeats 3] [--means] [--profile]

Per (model, mode), ms per step at batch 128 on real Fashion-MNIST (DIR/fashion_mnist/):
    cell    the cell's own loop (orchestrator.cell.trainer: _Run.train_epoch with engine=torch): numpy batches in the
            cell's seeded order copied to the GPU, the captured step replayed, loss, gradient norm and hits read
            back one step late for the NaN and collapse checks; deterministic cuDNN/cuBLAS
    plain   torch.nn modules of the same shape calling torch_ops.conv2d under a multiplier (nn.Conv2d native),
            nn.BatchNorm2d, torch.optim.SGD (momentum 0.9, weight decay 5e-4, foreach), channels-last, the data on
            the GPU, PyTorch's defaults (no determinism asked for), no host reads (bench/gpu_step_paths.py's
            torch_plain_step)
With --means, what each of the engine's means buys, each column the cell with one means taken away:
    replay    the captured step replayed back to back with nothing else: the GPU's time for the step, the floor
    read-now  the step's numbers read as soon as it is launched (the host waits for every step)
    keras-bn  Keras' own batch normalisation instead of models.batchnorm's fused one
With --profile, the GPU kernels of one eager cell step and one plain step, grouped by name, heaviest first.
Each is timed over `--steps` steps after 10 warm-up steps (the cell's capture among them), the GPU synchronised at
both ends, `--repeats` times; the median is reported. The kernels are verified bit-exact by tests/device before
they are timed here.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

os.environ["KERAS_BACKEND"] = "torch"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import keras  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from bench.gpu_step_paths import torch_plain_step  # noqa: E402
from models import datasets, resnet  # noqa: E402
from orchestrator.cell import engines  # noqa: E402
from orchestrator.cell.progress import Progress  # noqa: E402
from orchestrator.cell.trainer import State, _Run  # noqa: E402
from orchestrator.config.cell import resolve  # noqa: E402
from orchestrator.tracking.tracker import Tracker  # noqa: E402

WARMUP = 10
MEANS = ("replay", "read-now", "keras-bn")


def cell_config(model: str, mode: str, data_dir: str, root: str):
    """The cell's CellConfig, resolved as a launch resolves it."""
    conf = str(Path(__file__).resolve().parents[1] / "conf")
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            f"model={model}", f"mult={mode}", "dataset=fashion_mnist", f"data_dir={data_dir}", "engine=torch",
            f"checkpoint_root={root}", f"tracking_uri=sqlite:///{root}/mlflow.db", "tracking_mode=queue"])
    return resolve(cfg)


class _ReadNow:
    """A PendingStep already read: the engine's step with the host waiting for it."""

    def __init__(self, pending):
        self.numbers = pending.result()

    def result(self):
        return self.numbers


@contextmanager
def _keras_batch_norm(on: bool):
    """models.resnet builds Keras' own batch normalisation while on."""
    fused = resnet.BatchNormalization
    if on:
        resnet.BatchNormalization = keras.layers.BatchNormalization
    try:
        yield
    finally:
        resnet.BatchNormalization = fused


@contextmanager
def cell_run(model: str, mode: str, data_dir: str, keras_bn: bool = False):
    with tempfile.TemporaryDirectory() as root, _keras_batch_norm(keras_bn):
        cfg = cell_config(model, mode, data_dir, root)
        cell_dir = Path(cfg.cell_dir)
        cell_dir.mkdir(parents=True)
        tracker = Tracker(cfg.tracking.uri, "bench", cfg.identity, cell_dir, mode="queue")
        run = _Run(cfg, cfg.identity, cell_dir, tracker)
        state = State()
        run.progress = Progress(cfg, run.epochs, run.spe, state)
        try:
            yield run, state
        finally:
            run.progress.close()
            run.energy.close()


def cell_ms(model: str, mode: str, data_dir: str, steps: int, repeats: int, means: str = "") -> float:
    """Median ms per step of the cell's own training loop (`means`: one of MEANS taken away, or "" for none)."""
    with cell_run(model, mode, data_dir, keras_bn=means == "keras-bn") as (run, state):
        if means == "read-now":
            launch = run.steps.train_step
            run.steps.train_step = lambda x, y, lr: _ReadNow(launch(x, y, lr))
        results = []
        for _ in range(repeats):
            marks: list[float] = []
            calls = [0]

            def stop() -> bool:
                calls[0] += 1
                if calls[0] in (WARMUP, WARMUP + steps):  # the GPU synchronised at both ends only
                    torch.cuda.synchronize()
                    marks.append(time.perf_counter())
                return calls[0] >= WARMUP + steps
            run.train_epoch(state, stop)  # returns after the steps, with a checkpoint written (not timed)
            if state.step_in_epoch + WARMUP + steps > run.spe:
                state.step_in_epoch = 0  # the epoch's end is not what is timed: start its batches again
            results.append(1000 * (marks[1] - marks[0]) / steps)
            if means == "replay":
                results[-1] = _replay_ms(run, steps)
        return statistics.median(results)


def _replay_ms(run, steps: int) -> float:
    graph = run.steps.graph
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        graph.replay()
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - start) / steps


def plain_ms(model: str, mode: str, data_dir: str, steps: int, repeats: int) -> float:
    """Median ms per step of a plain PyTorch loop of the same network and multiplier."""
    step = _plain_step(model, mode, data_dir)
    results = []
    for _ in range(repeats):
        for i in range(WARMUP + steps):
            if i == WARMUP:
                torch.cuda.synchronize()
                start = time.perf_counter()
            step()
        torch.cuda.synchronize()
        results.append(1000 * (time.perf_counter() - start) / steps)
    return statistics.median(results)


def _plain_step(model: str, mode: str, data_dir: str):
    data = datasets.load("fashion_mnist", data_dir)
    images, labels = torch.from_numpy(data.x_train).cuda(), torch.from_numpy(data.y_train).cuda()
    return torch_plain_step(model, mode, images, labels, classes=data.num_classes)


def profile(model: str, mode: str, data_dir: str, top: int = 15) -> None:
    """The GPU kernels of one eager cell step and one plain step, by name, heaviest first."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    def show(label: str, step) -> None:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        events = [e for e in prof.key_averages() if e.self_device_time_total > 0]  # the kernels
        total = sum(e.self_device_time_total for e in events) / 1000
        print(f"  {label}: {total:.2f} ms of kernels in {sum(e.count for e in events)} launches", flush=True)
        for e in sorted(events, key=lambda e: -e.self_device_time_total)[:top]:
            print(f"    {e.self_device_time_total / 1000:7.3f} ms {e.count:4d}x  {e.key[:100]}", flush=True)

    with cell_run(model, mode, data_dir) as (run, _):
        x, y = run.data.x_train[:run.batch_size], run.data.y_train[:run.batch_size]
        xs, ys = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        show(f"{model} {mode} cell step (eager)", lambda: run.steps._step(xs, ys))
    torch.use_deterministic_algorithms(False)
    torch.backends.cudnn.deterministic = False
    show(f"{model} {mode} plain step", _plain_step(model, mode, data_dir))
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--models", default="resnet18,resnet34,resnet50")
    parser.add_argument("--modes", default="native,am16,am32")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--means", action="store_true", help="also time the cell with each of its means taken away")
    parser.add_argument("--profile", action="store_true", help="print the GPU kernels of a cell and a plain step")
    args = parser.parse_args()
    engines.start("torch", 0)  # the cell's determinism settings; the plain loop turns them off for itself

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch 128, Fashion-MNIST, ms per step "
          f"(median of {args.repeats} x {args.steps} steps)", flush=True)
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            if args.profile:
                profile(model, mode, args.data_dir)
            cell = cell_ms(model, mode, args.data_dir, args.steps, args.repeats)
            torch.use_deterministic_algorithms(False)
            torch.backends.cudnn.deterministic = False
            plain = plain_ms(model, mode, args.data_dir, args.steps, args.repeats)
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.deterministic = True
            line = f"{model:9s} {mode:7s} cell {cell:8.2f}  plain {plain:8.2f}  cell/plain x{cell / plain:.2f}"
            if args.means:
                line += "".join(f"  {means} {cell_ms(model, mode, args.data_dir, args.steps, args.repeats, means):8.2f}"
                                for means in MEANS)
            print(line, flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
