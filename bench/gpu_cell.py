"""A cell's training steps on a GPU through the torch engine, timed against a plain PyTorch loop of the same network
and multiplier in the same run: what issue 33's "within 1.25x (am16, am32), 1.5x (native)" is measured by.

    python bench/gpu_cell.py --data-dir DIR [--models resnet18,resnet34,resnet50] [--modes native,am16,am32]
                             [--steps 60] [--repeats 3]

Per (model, mode), ms per step at batch 128 on real Fashion-MNIST (DIR/fashion_mnist/):
    cell    the cell's own loop (orchestrator.cell.trainer: _Run.train_epoch with engine=torch): numpy batches in the
            cell's seeded order, copied to the GPU, the captured step replayed, loss, gradient norm and hits read
            back every step for the NaN and collapse checks; deterministic cuDNN/cuBLAS
    plain   torch.nn modules of the same shape calling torch_ops.conv2d under a multiplier (nn.Conv2d native),
            torch.optim.SGD (momentum 0.9, weight decay 5e-4, foreach), the data on the GPU, PyTorch's defaults
            (no determinism asked for), no host reads: bench/gpu_step_paths.py's yardstick
Each is timed over `--steps` steps after 10 warm-up steps (the cell's capture among them), `--repeats` times; the
median is reported. The kernels are verified bit-exact by tests/device before they are timed here.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ["KERAS_BACKEND"] = "torch"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from torch import nn  # noqa: E402

from bench.gpu_step_paths import plain_resnet  # noqa: E402
from models import datasets  # noqa: E402
from orchestrator.cell import engines  # noqa: E402
from orchestrator.cell.progress import Progress  # noqa: E402
from orchestrator.cell.trainer import State, _Run  # noqa: E402
from orchestrator.config.cell import resolve  # noqa: E402
from orchestrator.tracking.tracker import Tracker  # noqa: E402

WARMUP = 10


def cell_config(model: str, mode: str, data_dir: str, root: str):
    """The cell's CellConfig, resolved as a launch resolves it."""

    conf = str(Path(__file__).resolve().parents[1] / "conf")
    with initialize_config_dir(config_dir=conf, version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            f"model={model}", f"mult={mode}", "dataset=fashion_mnist", f"data_dir={data_dir}", "engine=torch",
            f"checkpoint_root={root}", f"tracking_uri=sqlite:///{root}/mlflow.db", "tracking_mode=queue"])
    return resolve(cfg)


def cell_ms(model: str, mode: str, data_dir: str, steps: int, repeats: int) -> float:
    """Median ms per step of the cell's own training loop."""

    with tempfile.TemporaryDirectory() as root:
        cfg = cell_config(model, mode, data_dir, root)
        cell_dir = Path(cfg.cell_dir)
        cell_dir.mkdir(parents=True)
        tracker = Tracker(cfg.tracking.uri, "bench", cfg.identity, cell_dir, mode="queue")
        run = _Run(cfg, cfg.identity, cell_dir, tracker)
        state = State()
        run.progress = Progress(cfg, run.epochs, run.spe, state)
        results = []
        for _ in range(repeats):
            marks: list[float] = []

            def stop() -> bool:
                torch.cuda.synchronize()
                marks.append(time.perf_counter())
                return len(marks) >= WARMUP + steps
            run.train_epoch(state, stop)  # returns after the steps, with a checkpoint written (not timed)
            results.append(1000 * (marks[-1] - marks[WARMUP - 1]) / steps)
        run.progress.close()
        run.energy.close()
        return statistics.median(results)


def plain_ms(model: str, mode: str, data_dir: str, steps: int, repeats: int) -> float:
    """Median ms per step of a plain PyTorch loop of the same network and multiplier."""

    data = datasets.load("fashion_mnist", data_dir)
    x_all = torch.from_numpy(data.x_train).cuda().permute(0, 3, 1, 2).contiguous()
    y_all = torch.from_numpy(data.y_train).cuda()
    net = plain_resnet(model, mode, in_channels=x_all.shape[1], classes=data.num_classes).cuda()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, foreach=True)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator(device="cuda").manual_seed(1)
    order = torch.randperm(len(x_all), device="cuda", generator=generator)
    results = []
    for _ in range(repeats):
        for i in range(WARMUP + steps):
            if i == WARMUP:
                torch.cuda.synchronize()
                start = time.perf_counter()
            rows = order[(i % 400) * 128:(i % 400 + 1) * 128]
            optimizer.zero_grad(set_to_none=True)
            loss_fn(net(x_all[rows]), y_all[rows]).backward()
            optimizer.step()
        torch.cuda.synchronize()
        results.append(1000 * (time.perf_counter() - start) / steps)
    return statistics.median(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--models", default="resnet18,resnet34,resnet50")
    parser.add_argument("--modes", default="native,am16,am32")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    engines.start("torch", 0)  # the cell's determinism settings; the plain loop turns them off for itself

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, batch 128, Fashion-MNIST, ms per step "
          f"(median of {args.repeats} x {args.steps} steps)", flush=True)
    for model in args.models.split(","):
        for mode in args.modes.split(","):
            cell = cell_ms(model, mode, args.data_dir, args.steps, args.repeats)
            torch.use_deterministic_algorithms(False)
            torch.backends.cudnn.deterministic = False
            plain = plain_ms(model, mode, args.data_dir, args.steps, args.repeats)
            torch.use_deterministic_algorithms(True)
            torch.backends.cudnn.deterministic = True
            print(f"{model:9s} {mode:7s} cell {cell:8.2f}  plain {plain:8.2f}  cell/plain x{cell / plain:.2f}",
                  flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
