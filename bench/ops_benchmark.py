"""Speed of the compiled ops against TensorFlow's native ops (oneDNN on CPU) on the same shapes, in the same run.

Shapes: the 3x3 convs of ResNet-18 on CIFAR-10 at batch 32 (one per stage, 32x32x64 down to 4x4x512) and the
dense layers of LeNet-300-100 at batch 128. For each shape and mode: forward, and forward + both gradients, each
timed as the median of several repeats of a tf.function (graph mode, so Python overhead is excluded), native and
simulated interleaved so that machine noise hits both alike. Every kernel is first checked bit for bit against the
numpy reference on single products (as the tests do) so nothing wrong is timed.

    python -m bench.ops_benchmark [--modes acc32,am16,am32] [--repeats 7] [--write docs/performance.md]
    python -m bench.ops_benchmark --levels x86-64-v4-vbmi,x86-64-v4,x86-64-v3 --write docs/performance.md

--levels runs the benchmark once per CPU level, each in its own process with the kernels built for that level
(AMDNN_OPS_TARGET) and oneDNN limited to the same instruction set (ONEDNN_MAX_CPU_ISA), and writes one table per
level (between the markers `<!-- benchmark table begin: LEVEL -->` and `... end: LEVEL -->`). The shapes, the
levels' limits (ONEDNN_ISA), the timing and the table are bench/cpu_common.py's, shared with
bench/torch_integer_benchmark.py (the integer modes on torch, without TensorFlow).
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

import ops
from bench.cpu_common import (ONEDNN_ISA, Benchmark, cpu_model, integer_ops, is_integer, layer_data, parser,
                              verify_integer_layer)
from ops.modes import reference
from ops.build import build


def verify_bit_exact(multiplier: str) -> None:
    if is_integer(multiplier):
        verify_integer_layer(multiplier, lambda x, w: integer_ops(multiplier)[0](x, w).numpy())
        return
    rng = np.random.default_rng(0)
    a = rng.standard_normal(256).astype(np.float32)
    b = rng.standard_normal(256).astype(np.float32)
    got = ops.matmul(a[:, None], b[None, :], multiplier=multiplier).numpy()
    want = reference.product(a[:, None], b[None, :], multiplier)
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise SystemExit(f"{multiplier}: the kernel is not bit-exact against the reference; not timing it")


def layer_functions(kind: str, shape, multiplier: str | None):
    """(forward, forward+backward) tf.functions over fixed random inputs; multiplier None = native TF op."""
    x, w = (tf.constant(array) for array in layer_data(kind, shape))
    if kind == "conv":
        op = (lambda p, q: tf.nn.conv2d(p, q, 1, "SAME")) if multiplier is None else \
            integer_ops(multiplier)[0] if is_integer(multiplier) else \
            (lambda p, q: ops.conv2d(p, q, 1, "SAME", 1, multiplier))
    else:
        op = tf.matmul if multiplier is None else integer_ops(multiplier)[1] if is_integer(multiplier) else \
            (lambda p, q: ops.matmul(p, q, multiplier))

    @tf.function(jit_compile=False)
    def forward():
        return op(x, w)

    @tf.function(jit_compile=False)
    def forward_backward():
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            y = op(x, w)
        # y is returned too: a gradient that does not read y (the integer modes' straight-through one) would let
        # the graph prune the forward op, and a training step needs y for its loss.
        return [y, *tape.gradient(y, [x, w], output_gradients=tf.ones_like(y))]

    return (lambda: forward().numpy()), (lambda: [g.numpy() for g in forward_backward()])


def machine() -> str:
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "default")
    return (f"{cpu_model()}, {os.cpu_count()} cores, TensorFlow {tf.__version__}, kernels: {build().target}, "
            f"oneDNN ISA: {onednn}")


def main() -> None:
    args = parser(__doc__.splitlines()[0], "acc32,am16,am32",
                  "comma-separated modes (ops.names(), lut:FILE)").parse_args()
    Benchmark("bench.ops_benchmark", "benchmark table", {"ONEDNN_MAX_CPU_ISA": ONEDNN_ISA}, verify_bit_exact,
              layer_functions, machine).run(args)


if __name__ == "__main__":
    main()
