"""Does the CIFAR recipe train a ResNet on real images? A short run on a GPU through Keras' torch backend.

    python bench/gpu_recipe.py --dataset fashion_mnist --data-dir DIR [--model resnet18] [--mult native]
                               [--epochs 10] [--json out.json]

Trains models.build_model(model, mult) on the dataset's real training set with the recipe a ResNet cell trains with
(bench/cifar_recipe.py = conf/train/cifar.yaml: SGD momentum 0.9, lr 0.1, batch 128, coupled L2 5e-4, cosine), the
cosine cut to --epochs as bench.recipe_sweep does, and prints the test accuracy after each epoch. The training loop is
bench/gpu_epoch.py's (the same steps a cell takes, without its checkpoints). For a machine where the cell itself
cannot run (no TensorFlow, no MLflow), and for datasets that fit the GPU machine's transfer limit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_epoch import Epoch, keras, torch  # noqa: E402  (sets KERAS_BACKEND=torch first)
from bench.cifar_recipe import RECIPE  # noqa: E402
from models import datasets  # noqa: E402

EVAL_BATCH = 1000


def test_accuracy(model, images: torch.Tensor, labels: torch.Tensor) -> float:
    hits = 0
    with torch.no_grad():
        for start in range(0, len(images), EVAL_BATCH):
            probabilities = model(images[start:start + EVAL_BATCH], training=False)
            hits += int((probabilities.argmax(dim=-1) == labels[start:start + EVAL_BATCH]).sum())
    return hits / len(images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True, choices=sorted(datasets.DATASETS))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--mult", default="native")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/gpu_recipe.py needs a CUDA GPU")
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as the simulations
    keras.utils.set_random_seed(0)
    data = datasets.load(args.dataset, args.data_dir)
    gpu = lambda array: torch.as_tensor(array).cuda()  # noqa: E731
    recipe = {**RECIPE, "epochs": args.epochs}
    run = Epoch(args.model, args.mult, gpu(data.x_train), gpu(data.y_train), recipe, data.num_classes)
    x_test, y_test = gpu(data.x_test), gpu(data.y_test)
    print(f"{torch.cuda.get_device_name()}: {args.model} under {args.mult} on {args.dataset} "
          f"({len(data.x_train)} training images {data.input_shape}), {recipe}", flush=True)
    rows = []
    for epoch in range(1, args.epochs + 1):
        seconds, loss = run.timed(run.steps_per_epoch)
        accuracy = test_accuracy(run.model, x_test, y_test)
        rows.append({"epoch": epoch, "loss": loss, "test_accuracy": accuracy, "seconds": seconds})
        print(f"epoch {epoch}/{args.epochs}: last loss {loss:.4f}, test accuracy {100 * accuracy:.2f} %, "
              f"{seconds:.1f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "model": args.model,
                                         "mult": args.mult, "dataset": args.dataset, "recipe": recipe,
                                         "epochs": rows}, indent=1))


if __name__ == "__main__":
    main()
