"""How much of real training the CPU kernels' fast path does: ops.path_counts() around N SGD steps of a model.

The fast kernels' range check is decided per GEMM block (ops/cc/gemm_cpu.cc); this counts, over ordinary training,
the GEMM calls that had any generic block and the share of products the generic kernel computed.

    python -m bench.training_paths --model lenet5 --dataset mnist --data-dir DIR --steps 300 --mult am16
    python -m bench.training_paths --model resnet18 --dataset cifar-shaped --steps 100 --mult am16

--dataset cifar-shaped trains on random 32x32x3 images in [0, 1] with random labels (no CIFAR files needed: the
operands' ranges, not the task, decide the path).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import ops
from models import build_model, datasets
from models.datasets.dataset import Dataset


def dataset(name: str, data_dir: str | None):
    if name != "cifar-shaped":
        return datasets.load(name, data_dir)
    rng = np.random.default_rng(0)
    images = lambda n: rng.random((n, 32, 32, 3), dtype=np.float32)
    labels = lambda n: rng.integers(0, 10, n).astype(np.int64)
    return Dataset("cifar10", images(5000), labels(5000), images(100), labels(100), 10, (32, 32, 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--dataset", default="mnist", help="a dataset name of models.datasets, or cifar-shaped")
    parser.add_argument("--data-dir")
    parser.add_argument("--mult", default="am16")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()

    import keras  # after the arguments: --help and a bad option answer without loading TensorFlow
    import tensorflow as tf

    data = dataset(args.dataset, args.data_dir)
    model = build_model(args.model, args.mult, data.input_shape, data.num_classes, seed=0)
    optimizer = keras.optimizers.SGD(0.02, momentum=0.9)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    before, started, step, epoch = ops.path_counts(), time.time(), 0, 0
    while step < args.steps:
        for _, x, y in datasets.batches(data, args.batch, 0, epoch):
            loss = float(train_step(x, y))
            step += 1
            if step == args.steps:
                break
        epoch += 1
    after = ops.path_counts()
    counts = {key: after[key] - before[key] for key in after}
    products = counts["fast_products"] + counts["generic_products"]
    print(f"{args.model} on {args.dataset}, {args.mult}, {args.steps} steps of {args.batch} "
          f"({time.time() - started:.0f} s, last loss {loss:.3f}), kernels {ops.cpu_kernels()['level']}: "
          f"{counts['fast_calls']} fast and {counts['generic_calls']} generic GEMM calls, "
          f"{counts['generic_products'] / max(products, 1):.2e} of {products:.3e} products generic")


if __name__ == "__main__":
    main()
