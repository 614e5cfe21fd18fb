"""Speed of the compiled ops against TensorFlow's native ops (oneDNN on CPU) on the same shapes, in the same run.

Shapes: the 3x3 convs of ResNet-18 on CIFAR-10 at batch 32 (one per stage, 32x32x64 down to 4x4x512) and the
dense layers of LeNet-300-100 at batch 128. For each shape and mode: forward, and forward + both gradients, each
timed as the median of several repeats of a tf.function (graph mode, so Python overhead is excluded), native and
simulated interleaved so that machine noise hits both alike. Every kernel is first checked bit for bit against the
numpy reference on single products (as the tests do) so nothing wrong is timed.

    python -m bench.ops_benchmark [--modes acc32,am16,am32] [--repeats 7] [--write docs/performance.md]
    python -m bench.ops_benchmark --levels x86-64-v4-vbmi,x86-64-v4,x86-64-v3 --write docs/performance.md

--levels runs the benchmark once per CPU level, each in its own process with the kernels built for that level
(AMDNN_OPS_TARGET) and oneDNN limited to the same instruction set (ONEDNN_MAX_CPU_ISA, ONEDNN_ISA below), and
writes one table per level (between the markers `<!-- benchmark table begin: LEVEL -->` and `... end: LEVEL -->`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import tensorflow as tf

import ops
from ops.modes import reference
from ops.build import build

# name: (input NHWC, filter HWIO) — ResNet-18 CIFAR 3x3 convs, stride 1, one per stage
CONV_SHAPES = {
    "conv 32x32x64->64": ((32, 32, 32, 64), (3, 3, 64, 64)),
    "conv 16x16x128->128": ((32, 16, 16, 128), (3, 3, 128, 128)),
    "conv 8x8x256->256": ((32, 8, 8, 256), (3, 3, 256, 256)),
    "conv 4x4x512->512": ((32, 4, 4, 512), (3, 3, 512, 512)),
}
# LeNet-300-100 at batch 128: (batch, in, out)
DENSE_SHAPES = {
    "dense 784->300": (128, 784, 300),
    "dense 300->100": (128, 300, 100),
    "dense 100->10": (128, 100, 10),
}


# oneDNN's ISA limit matching each kernel level: the same vector width and instructions for both sides (None: oneDNN's
# own best, AMX and AVX-512 FP16 excluded only where the CPU lacks them).
ONEDNN_ISA = {"x86-64-v4-vbmi": None, "x86-64-v4": "AVX512_CORE", "x86-64-v3": "AVX2", "x86-64-v2": "SSE41",
              "x86-64": "SSE41"}


def is_integer(multiplier: str) -> bool:
    return ops.parse(multiplier).is_integer


def integer_ops(multiplier: str):
    """(conv, dense) of an integer mode as its layers compute them (ops.keras_integer on Keras' TensorFlow backend):
    quantise both operands (the activations by their batch's range), the compiled table op, the rescale."""
    from ops import keras_integer  # here, not at the top: the float modes' benchmark loads no Keras
    from ops.modes.integer_reference import integer_mode

    mode = integer_mode(multiplier)
    table = tf.constant(keras_integer.table_entries(mode))
    conv = lambda p, q: keras_integer.conv2d(p, q, mode, keras_integer.tensor_range(p), 1, "SAME", 1, table=table)
    dense = lambda p, q: keras_integer.dense(p, q, mode, keras_integer.tensor_range(p), table=table)
    return conv, dense


def verify_bit_exact(multiplier: str) -> None:
    if is_integer(multiplier):
        verify_integer_layer(multiplier)
        return
    rng = np.random.default_rng(0)
    a = rng.standard_normal(256).astype(np.float32)
    b = rng.standard_normal(256).astype(np.float32)
    got = ops.matmul(a[:, None], b[None, :], multiplier=multiplier).numpy()
    want = reference.product(a[:, None], b[None, :], multiplier)
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise SystemExit(f"{multiplier}: the kernel is not bit-exact against the reference; not timing it")


def verify_integer_layer(multiplier: str) -> None:
    """An integer mode's conv layer on 8 x 8 x 32 -> 48 against ops/modes/integer_reference, bit for bit."""
    from ops.modes import integer_reference

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 8, 32)).astype(np.float32)
    w = rng.standard_normal((3, 3, 32, 48)).astype(np.float32)
    got = integer_ops(multiplier)[0](x, w).numpy()
    want = integer_reference.conv2d_forward(x, w, integer_reference.integer_mode(multiplier))
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise SystemExit(f"{multiplier}: the integer layer is not bit-exact against the reference; not timing it")


def median_seconds(fn, repeats: int) -> float:
    fn()  # trace and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def layer_functions(kind: str, shape, multiplier: str | None):
    """(forward, forward+backward) tf.functions over fixed random inputs; multiplier None = native TF op."""
    rng = np.random.default_rng(1)
    if kind == "conv":
        shape_x, shape_w = shape
        x = tf.constant(np.maximum(rng.standard_normal(shape_x), 0).astype(np.float32))  # ReLU activations
        w = tf.constant((rng.standard_normal(shape_w) * 0.05).astype(np.float32))
        op = (lambda p, q: tf.nn.conv2d(p, q, 1, "SAME")) if multiplier is None else \
            integer_ops(multiplier)[0] if is_integer(multiplier) else \
            (lambda p, q: ops.conv2d(p, q, 1, "SAME", 1, multiplier))
    else:
        batch, n_in, n_out = shape
        x = tf.constant(np.maximum(rng.standard_normal((batch, n_in)), 0).astype(np.float32))
        w = tf.constant((rng.standard_normal((n_in, n_out)) * 0.05).astype(np.float32))
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


def measure(modes: list[str], repeats: int) -> list[dict]:
    rows = []
    shapes = [("conv", name, shape) for name, shape in CONV_SHAPES.items()] + \
             [("dense", name, shape) for name, shape in DENSE_SHAPES.items()]
    for kind, name, shape in shapes:
        native_fwd, native_fb = layer_functions(kind, shape, None)
        for mode in modes:
            fwd, fb = layer_functions(kind, shape, mode)
            t_native_fwd, t_fwd = median_seconds(native_fwd, repeats), median_seconds(fwd, repeats)
            t_native_fb, t_fb = median_seconds(native_fb, repeats), median_seconds(fb, repeats)
            rows.append(dict(shape=name, mode=mode, native_fwd_ms=1e3 * t_native_fwd, fwd_ms=1e3 * t_fwd,
                             native_fb_ms=1e3 * t_native_fb, fb_ms=1e3 * t_fb))
            print(f"{name:22s} {mode:6s} fwd {1e3 * t_fwd:8.2f} ms ({t_fwd / t_native_fwd:5.2f}x)  "
                  f"fwd+bwd {1e3 * t_fb:8.2f} ms ({t_fb / t_native_fb:5.2f}x)", flush=True)
    return rows


def machine() -> str:
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", "default")
    return (f"{cpu}, {os.cpu_count()} cores, TensorFlow {tf.__version__}, kernels: {build().target}, oneDNN ISA: "
            f"{onednn}")


def label(mode: str) -> str:
    """A table column's name: the mode, or the mode's name and the table file's stem (lut ACC_7, int8 mul8s_1L2H)."""
    name, _, path = mode.partition(":")
    return f"{name} {os.path.basename(path).split('.')[0]}" if path else mode


def markdown(rows: list[dict], modes: list[str]) -> str:
    lines = ["| shape | " + " | ".join(f"{label(m)} fwd | {label(m)} fwd+bwd" for m in modes) + " | native fwd ms | native fwd+bwd ms |",
             "|---|" + "---|---|" * len(modes) + "---|---|"]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        cells = []
        native = None
        for mode in modes:
            r = next(r for r in rows if r["shape"] == shape and r["mode"] == mode)
            native = r
            cells.append(f"{r['fwd_ms'] / r['native_fwd_ms']:.2f}x | {r['fb_ms'] / r['native_fb_ms']:.2f}x")
        lines.append(f"| {shape} | " + " | ".join(cells) +
                     f" | {native['native_fwd_ms']:.2f} | {native['native_fb_ms']:.2f} |")
    # Totals: what a training step of these layers costs, simulated over native.
    totals = []
    for mode in modes:
        sel = [r for r in rows if r["mode"] == mode]
        totals.append(f"{sum(r['fwd_ms'] for r in sel) / sum(r['native_fwd_ms'] for r in sel):.2f}x | "
                      f"{sum(r['fb_ms'] for r in sel) / sum(r['native_fb_ms'] for r in sel):.2f}x")
    lines.append("| **all shapes (sum of times)** | " + " | ".join(totals) + " | | |")
    return "\n".join(lines)


def write_table(path: str, marker: str, stamp: str, table: str) -> None:
    """Replace the section between `<!-- benchmark table begin{marker} -->` and its end marker in path."""
    text = open(path).read()
    begin, end = f"<!-- benchmark table begin{marker} -->", f"<!-- benchmark table end{marker} -->"
    if begin not in text:
        raise SystemExit(f"{path} has no '{begin}' ... '{end}' section to write the table into")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    open(path, "w").write(f"{head}{begin}\n{stamp}\n\n{table}\n{end}{tail}")


def run_levels(levels: list[str], argv: list[str]) -> None:
    """The benchmark once per level, each in its own process (the ISA limits are read when TF and the ops load)."""
    for level in levels:
        if level not in ONEDNN_ISA:
            raise SystemExit(f"unknown level {level!r}; valid: {', '.join(ONEDNN_ISA)}")
        env = {**os.environ, "AMDNN_OPS_TARGET": level}
        env.pop("ONEDNN_MAX_CPU_ISA", None)
        if ONEDNN_ISA[level]:
            env["ONEDNN_MAX_CPU_ISA"] = ONEDNN_ISA[level]
        print(f"== {level} (oneDNN ISA {ONEDNN_ISA[level] or 'default'})", flush=True)
        subprocess.run([sys.executable, "-m", "bench.ops_benchmark", "--level", level, *argv], env=env, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="acc32,am16,am32", help="comma-separated modes (ops.names(), lut:FILE)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write", help="markdown file whose table section to replace (docs/performance.md)")
    parser.add_argument("--levels", help="comma-separated CPU levels to run one after the other (see ONEDNN_ISA)")
    parser.add_argument("--level", help=argparse.SUPPRESS)  # set by --levels for its child processes
    args = parser.parse_args()
    if args.levels:
        passed = [arg for pair in (("--modes", args.modes), ("--repeats", str(args.repeats))) for arg in pair]
        run_levels([level for level in args.levels.split(",") if level],
                   passed + (["--write", args.write] if args.write else []))
        return
    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        verify_bit_exact(mode)
    rows = measure(modes, args.repeats)
    table = markdown(rows, modes)
    stamp = f"Measured {datetime.date.today().isoformat()} on {machine()}; median of {args.repeats} repeats."
    print("\n" + stamp + "\n\n" + table)
    if args.write:
        write_table(args.write, f": {args.level}" if args.level else "", stamp, table)


if __name__ == "__main__":
    main()
