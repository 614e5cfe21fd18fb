"""What the CPU benchmarks against oneDNN share: the shapes, each level's ISA limit, the integer layer's check, the
timing loop, the markdown table, the per-level runner and the command's flow (Benchmark.run). Neither TensorFlow nor
torch is imported here.

bench/ops_benchmark.py (TensorFlow: every mode) and bench/torch_integer_benchmark.py (Keras on torch: the integer
modes, for machines without TensorFlow) read every list from here, so their tables cover the same shapes and levels.
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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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
SHAPES = [("conv", name, shape) for name, shape in CONV_SHAPES.items()] + \
         [("dense", name, shape) for name, shape in DENSE_SHAPES.items()]

# oneDNN's ISA limit matching each kernel level: the same vector width and instructions for both sides (None: oneDNN's
# own best, AMX and AVX-512 FP16 excluded only where the CPU lacks them).
ONEDNN_ISA = {"x86-64-v4-vbmi": None, "x86-64-v4": "AVX512_CORE", "x86-64-v3": "AVX2", "x86-64-v2": "SSE41",
              "x86-64": "SSE41"}


# An integer mode with this suffix (int8+table_gradients) is timed with its backward through the table
# (mult.table_gradients=true: ops.keras_integer's conv2d_table_gradients) instead of straight-through.
TABLE_GRADIENTS = "+table_gradients"


def _integer_name(multiplier: str) -> tuple[str, bool]:
    """(the mode's name, whether its gradients go through the table)."""
    if multiplier.endswith(TABLE_GRADIENTS):
        return multiplier[:-len(TABLE_GRADIENTS)], True
    return multiplier, False


def is_integer(multiplier: str) -> bool:
    from ops.modes.multipliers import parse  # numpy only, as every import of this module

    name, table_gradients = _integer_name(multiplier)
    integer = parse(name).is_integer
    if table_gradients and not integer:
        raise SystemExit(f"{multiplier}: {TABLE_GRADIENTS} names an integer mode's option (int8{TABLE_GRADIENTS})")
    return integer


def integer_ops(multiplier: str):
    """(conv, dense) of an integer mode as its layers compute them (ops.keras_integer on Keras' backend, whichever
    this process runs): quantise both operands (the activations by their batch's range), the compiled table op, the
    rescale; the backward straight-through, or through the table for a name ending in TABLE_GRADIENTS."""
    from keras import ops as K  # here, not at the top: the caller picks Keras' backend first

    from ops import keras_integer
    from ops.modes.integer_reference import integer_mode

    name, table_gradients = _integer_name(multiplier)
    mode = integer_mode(name)
    table = K.convert_to_tensor(keras_integer.table_entries(mode))
    def conv(p, q):  # the batch's range and finiteness from one pass, as the layers take them
        lo, hi, finite = keras_integer.finite_range(p)
        return keras_integer.conv2d(p, q, mode, (lo, hi), 1, "SAME", 1, table=table, table_gradients=table_gradients,
                                    input_finite=finite)

    def dense(p, q):
        lo, hi, finite = keras_integer.finite_range(p)
        return keras_integer.dense(p, q, mode, (lo, hi), table=table, table_gradients=table_gradients,
                                   input_finite=finite)

    return conv, dense


def verify_integer_layer(multiplier: str, conv) -> None:
    """An integer mode's conv layer on 8 x 8 x 32 -> 48 against ops/modes/integer_reference, bit for bit; conv(x, w)
    takes and returns numpy arrays (NHWC, HWIO)."""
    from ops.modes import integer_reference

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 8, 32)).astype(np.float32)
    w = rng.standard_normal((3, 3, 32, 48)).astype(np.float32)
    got = conv(x, w)
    want = integer_reference.conv2d_forward(x, w, integer_reference.integer_mode(_integer_name(multiplier)[0]))
    if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
        raise SystemExit(f"{multiplier}: the integer layer is not bit-exact against the reference; not timing it")


def layer_data(kind: str, shape):
    """The fixed random (x, w) numpy operands of a shape: ReLU activations (half zeros) and small weights."""
    rng = np.random.default_rng(1)
    if kind == "conv":
        shape_x, shape_w = shape
    else:
        batch, n_in, n_out = shape
        shape_x, shape_w = (batch, n_in), (n_in, n_out)
    x = np.maximum(rng.standard_normal(shape_x), 0).astype(np.float32)
    w = (rng.standard_normal(shape_w) * 0.05).astype(np.float32)
    return x, w


def median_seconds(fn, repeats: int) -> float:
    fn()  # trace and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(modes: list[str], repeats: int, layer_functions) -> list[dict]:
    """Every shape under every mode against the native op, native and simulated interleaved. layer_functions(kind,
    shape, multiplier) gives (forward, forward+backward) callables; multiplier None is the native op."""
    rows = []
    for kind, name, shape in SHAPES:
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


def cpu_model() -> str:
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return cpu


def label(mode: str) -> str:
    """A table column's name: the mode, or the mode's name and the table file's stem (lut ACC_7, int8 mul8s_1L2H),
    and "table gradients" after an integer mode timed with them."""
    mode, table_gradients = _integer_name(mode)
    name, _, path = mode.partition(":")
    return (f"{name} {os.path.basename(path).split('.')[0]}" if path else mode) + \
        (" table gradients" if table_gradients else "")


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


def write_table(path: str, tag: str, level: str | None, stamp: str, table: str) -> None:
    """Replace the section between `<!-- {tag} begin: {level} -->` and its end marker in path (without `: {level}`
    when level is None)."""
    text = open(path).read()
    marker = f": {level}" if level else ""
    begin, end = f"<!-- {tag} begin{marker} -->", f"<!-- {tag} end{marker} -->"
    if begin not in text:
        raise SystemExit(f"{path} has no '{begin}' ... '{end}' section to write the table into")
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    open(path, "w").write(f"{head}{begin}\n{stamp}\n\n{table}\n{end}{tail}")


def parser(description: str, default_modes: str, modes_help: str) -> argparse.ArgumentParser:
    """The options both benchmarks take."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--modes", default=default_modes, help=modes_help)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write", help="markdown file whose table section to replace (docs/performance.md)")
    parser.add_argument("--levels", help="comma-separated CPU levels to run one after the other (see ONEDNN_ISA)")
    parser.add_argument("--level", help=argparse.SUPPRESS)  # set by --levels for its child processes
    return parser


def run_levels(module: str, args: argparse.Namespace, limits: dict[str, dict[str, str | None]],
               extra: list[str] = ()) -> None:
    """`python -m module` once per level of args.levels, each in its own process: the kernels built for the level
    (AMDNN_OPS_TARGET) and every library of `limits` ({environment variable: {level: value, None for no limit}})
    limited to it; those variables are read only when a library first runs, so they are set before the child starts.
    The child gets --modes, --repeats, --write and `extra`."""
    argv = ["--modes", args.modes, "--repeats", str(args.repeats), *(["--write", args.write] if args.write else []),
            *extra]
    for level in [level for level in args.levels.split(",") if level]:
        if level not in ONEDNN_ISA:
            raise SystemExit(f"unknown level {level!r}; valid: {', '.join(ONEDNN_ISA)}")
        env = {**os.environ, "AMDNN_OPS_TARGET": level}
        for variable, values in limits.items():
            env.pop(variable, None)
            if values[level]:
                env[variable] = values[level]
        settings = ", ".join(f"{variable}={values[level] or 'default'}" for variable, values in limits.items())
        print(f"== {level} ({settings})", flush=True)
        subprocess.run([sys.executable, "-m", module, "--level", level, *argv], env=env, check=True)


@dataclass(frozen=True)
class Benchmark:
    """What differs between the CPU benchmarks; run() is what they share."""

    module: str  # `python -m {module}`: the process --levels starts once per level
    tag: str  # the markers --write fills: `<!-- {tag} begin: LEVEL -->` ... `<!-- {tag} end: LEVEL -->`
    limits: dict[str, dict[str, str | None]]  # run_levels' {environment variable: {level: value}}
    verify: Callable[[str], None]  # a mode's check against its reference; SystemExit when it fails
    layer_functions: Callable  # measure's (kind, shape, mode or None) -> (forward, forward+backward)
    machine: Callable[[], str]  # the stamp's CPU, framework and kernel level

    def run(self, args: argparse.Namespace, extra: list[str] = ()) -> None:
        """With --levels, one process per level (run_levels, passing `extra`); else check every mode, time it,
        print the table with its stamp (date, machine, repeats) and write it between the markers of args.level."""
        if args.levels:
            run_levels(self.module, args, self.limits, extra)
            return
        modes = [m for m in args.modes.split(",") if m]
        for mode in modes:
            self.verify(mode)
        table = markdown(measure(modes, args.repeats, self.layer_functions), modes)
        stamp = f"Measured {datetime.date.today().isoformat()} on {self.machine()}; median of {args.repeats} repeats."
        print("\n" + stamp + "\n\n" + table)
        if args.write:
            write_table(args.write, self.tag, args.level, stamp, table)
