"""Per-layer cost of a simulated multiplier: every AM layer of a model, forward and backward, timed against Keras' own
layer (oneDNN on CPU, cuDNN/cuBLAS on GPU) on the same shapes and weights, in one process.

    python -m models.profile --model lenet5 --mult am16 [--dataset digits] [--batch-size 64] [--repeats 20]
                             [--out layer-profile.md]

Prints a table (one line per AM layer and a total): input and kernel shapes, multiplies per forward pass, the
median time of `repeats` calls of the forward pass, and of the backward pass (input and kernel gradients), for the
AM layer and its native twin, with the ratio AM / native. With --out it also writes the table as markdown and a CSV
beside it (same name, .csv). Training takes the same profile with profile_layers=true (logged to the cell's run).

How it is timed: each pass returns a scalar (the sum of its outputs; a tf.function on Keras' TensorFlow backend, an
eager torch call on its torch backend), read back as a Python float, so that a GPU's asynchronous kernels have
finished when the clock stops; the sum costs the same on both sides.
The backward time (input and kernel gradients) is that of a forward+backward call minus that of a forward call made
just before it (the gradient ops need their forward op on the tape), the median over `repeats` such pairs. Every
function is called WARMUP times before it is timed (tracing, first touch of memory).
The layers run on the backend's default device: the first GPU where the framework sees one, else the CPU.
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if __name__ == "__main__":  # the command: on a machine without a GPU driver, TensorFlow's CUDA probe is only noise
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # its start-up banner too, as a training process hides it
    from models.cuda_probe import quiet_probe_for_this_command
    quiet_probe_for_this_command()

from ops import NATIVE  # noqa: E402

from models.datasets import DATASETS  # noqa: E402
from models.layer_list import csv_of, multiply_accumulates, table_lines  # noqa: E402
from models.registry import MODELS, build_model  # noqa: E402

WARMUP = 2
REPEATS = 20
SEED = 0
COLUMNS = ("layer", "kind", "input", "kernel", "mults_per_forward", "device",
           "forward_am_ms", "forward_native_ms", "forward_ratio",
           "backward_am_ms", "backward_native_ms", "backward_ratio")


def am_layers(model):
    """The model's AMConv2D and AMDense layers (and the integer modes' IntConv2D and IntDense), in model order."""
    from models.integer_layers import IntConv2D, IntDense  # here, not at the top: `--help` loads no Keras
    from models.layers import AMConv2D, AMDense

    return [layer for layer in model.layers if isinstance(layer, (AMConv2D, AMDense, IntConv2D, IntDense))]


def native_twin(layer, input_shape):
    """Keras' own Conv2D or Dense with the AM layer's configuration and weights."""
    import keras  # here, not at the top: `--help` loads no Keras or TensorFlow

    config = {k: v for k, v in layer.get_config().items() if k not in ("multiplier", "exact_gradients")}
    twin = (keras.layers.Conv2D if isinstance(layer, keras.layers.Conv2D) else keras.layers.Dense).from_config(config)
    twin.build(input_shape)
    twin.set_weights(layer.get_weights()[:len(twin.weights)])  # an integer layer's activation range comes last
    return twin


def _seconds(function, x) -> float:
    start = time.perf_counter()
    float(function(x))
    return time.perf_counter() - start


def _torch_passes(layer, dy):
    """(forward, forward+backward) of `layer` on Keras' torch backend, each returning a scalar tensor."""
    import torch  # only on Keras' torch backend: a TensorFlow-only install has no torch

    def forward(x):
        with torch.no_grad():
            return layer(x).sum()

    def forward_backward(x):
        x = x.detach().requires_grad_()
        dx, dw = torch.autograd.grad(layer(x), [x, layer.kernel.value], grad_outputs=dy)
        return dx.sum() + dw.sum()

    return forward, forward_backward


def _passes(layer, dy):
    """(forward, forward+backward) of `layer` as functions of its input, each returning a scalar."""
    import keras  # as in native_twin

    if keras.backend.backend() == "torch":
        return _torch_passes(layer, dy)
    import tensorflow as tf  # only on Keras' TensorFlow backend: a torch-only install has none

    @tf.function(jit_compile=False)  # the AM ops have no XLA kernels
    def forward(x):
        return tf.reduce_sum(layer(x))

    @tf.function(jit_compile=False)
    def forward_backward(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        dx, dw = tape.gradient(y, [x, layer.kernel], output_gradients=dy)
        return tf.reduce_sum(dx) + tf.reduce_sum(dw)

    return forward, forward_backward


def _time_layer(layer, x, dy, repeats: int) -> tuple[float, float]:
    """(forward ms, backward ms): medians over `repeats` pairs of a forward call and a forward+backward call made
    back to back, the backward time of a pair being their difference (pairs cancel the drift of a busy machine)."""
    forward, forward_backward = _passes(layer, dy)
    for _ in range(WARMUP):
        float(forward(x))
        float(forward_backward(x))
    forwards, backwards = [], []
    for _ in range(repeats):
        alone, both = _seconds(forward, x), _seconds(forward_backward, x)
        forwards.append(alone)
        backwards.append(both - alone)
    return 1000 * statistics.median(forwards), max(1000 * statistics.median(backwards), 0.0)


def _device_name(tensor) -> str:
    """CPU:0 / GPU:0 (TensorFlow's device string), or torch's cpu / cuda:0."""
    return str(tensor.device).rsplit("device:", 1)[-1]


def profile_model(model, batch_size: int, repeats: int = REPEATS) -> list[dict]:
    """One dict per AM layer of `model` (COLUMNS) plus a "total" line; empty for a model without AM layers."""
    import keras  # as in native_twin

    layers = am_layers(model)
    if not layers:
        return []
    rng = np.random.default_rng(SEED)
    probe = keras.Model(model.inputs, [layer.input for layer in layers])
    x0 = rng.standard_normal((batch_size, *model.inputs[0].shape[1:])).astype(np.float32)
    inputs = probe(keras.ops.convert_to_tensor(x0))
    inputs = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    out = []
    for layer, x in zip(layers, inputs):
        x = keras.ops.convert_to_tensor(keras.ops.convert_to_numpy(x))
        y = layer(x)
        dy = keras.ops.convert_to_tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
        am_forward, am_backward = _time_layer(layer, x, dy, repeats)
        twin = native_twin(layer, tuple(x.shape))
        native_forward, native_backward = _time_layer(twin, x, dy, repeats)
        out.append({"layer": layer.name, "kind": type(layer).__name__, "input": "x".join(map(str, x.shape)),
                    "kernel": "x".join(map(str, layer.kernel.shape)),
                    "mults_per_forward": multiply_accumulates(layer.kernel.shape, tuple(y.shape)),
                    "device": _device_name(y),
                    "forward_am_ms": am_forward, "forward_native_ms": native_forward,
                    "backward_am_ms": am_backward, "backward_native_ms": native_backward})
    total = {"layer": "total", "kind": "", "input": "", "kernel": "", "device": out[0]["device"],
             **{key: sum(r[key] for r in out) for key in ("mults_per_forward", "forward_am_ms", "forward_native_ms",
                                                          "backward_am_ms", "backward_native_ms")}}
    for line in out + [total]:
        for stage in ("forward", "backward"):
            native = line[f"{stage}_native_ms"]
            line[f"{stage}_ratio"] = line[f"{stage}_am_ms"] / native if native > 0 else float("nan")
    return out + [total]


def _cell(key: str, value) -> str:
    if key.endswith("_ms"):
        return f"{value:.3f}"
    if key.endswith("_ratio"):
        return f"{value:.1f}x"
    if key == "mults_per_forward" and value != "":
        return f"{value:,}"
    return str(value)


def markdown(rows: list[dict], title: str) -> str:
    head = ("layer", "kind", "input", "kernel", "multiplies / forward", "device", "forward AM (ms)",
            "forward native (ms)", "forward AM/native", "backward AM (ms)", "backward native (ms)",
            "backward AM/native")
    return "\n".join(table_lines(title, head, COLUMNS, rows, _cell)) + "\n"


def csv_text(rows: list[dict]) -> str:
    return csv_of(rows, COLUMNS)


def title(model_name: str, multiplier: str, batch_size: int, repeats: int) -> str:
    return (f"Per-layer time of {model_name} under {multiplier} against the native layers: batch {batch_size}, "
            f"median of {repeats} calls, {platform.node()}, {time.strftime('%Y-%m-%d %H:%M %Z')}")


def write(rows: list[dict], heading: str, path) -> list:
    """The table as markdown at `path` and as CSV beside it; the two paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown(rows, heading))
    path.with_suffix(".csv").write_text(csv_text(rows))
    return [path, path.with_suffix(".csv")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.profile", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help=", ".join(MODELS))
    parser.add_argument("--mult", required=True, help="a mode of ops.names() but native, or lut:<file>")
    parser.add_argument("--dataset", default="digits", help=f"input shape and classes of: {', '.join(DATASETS)}")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=REPEATS, help="timed calls per pass (median)")
    parser.add_argument("--out", default=None, help="also write the table here (markdown) and as .csv beside it")
    args = parser.parse_args(argv)
    if args.dataset not in DATASETS:
        parser.error(f"--dataset {args.dataset!r}: valid data sets are {', '.join(DATASETS)}")
    if args.mult == NATIVE:
        parser.error("--mult native has no AM layers to time; pick the multiplier to compare with native, e.g. am16")
    if args.batch_size < 1 or args.repeats < 1:
        parser.error("--batch-size and --repeats must be at least 1")

    spec = DATASETS[args.dataset]
    try:
        model = build_model(args.model, args.mult, spec.input_shape, spec.num_classes)
    except ValueError as e:
        parser.error(str(e))
    rows = profile_model(model, args.batch_size, args.repeats)
    heading = title(args.model, args.mult, args.batch_size, args.repeats)
    print(markdown(rows, heading))
    if args.out:
        print("wrote " + ", ".join(map(str, write(rows, heading, args.out))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
