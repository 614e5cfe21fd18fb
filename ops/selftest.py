"""The GPU self-test: the first thing to run on a new cluster's GPU node, before a grid books days of GPU time.

    python -m ops.selftest [--framework tensorflow|torch] [--no-speed] [--pairs-per-side 1000]

Checks the GPU kernels against the CPU kernels of the same build, through TensorFlow (the custom ops the cells use)
or PyTorch (the binding; how the GPU test machine without TensorFlow runs it); default: TensorFlow if it is
installed and sees a GPU, else torch.

1. Products, every mode and three ApproxTrain tables (am16, mit16, acc16 written by ops.modes.table_make):
   [N, 1] x [1, N] matmuls, one product per output, GPU bits == CPU bits, NaN payloads included
   (ops.modes.operands: every special-value pair, then random and fast-path operands,
   (2 x pairs-per-side^2) >= 10^6 pairs in all per mode).
2. Layers: conv2d (3x3 stride 1 and 2 SAME, 1x1 stride 2, dilation 2 VALID) and matmul, forward and both gradients,
   GPU against CPU within fp32 summation tolerance (relative Frobenius error <= 1e-5; the two sum in different
   orders).
3. The integer modes' op (8-bit codes, table products, exact integer sums): the same conv geometries on random codes,
   zero points and tables (signed and unsigned, reaching both ends of their ranges), GPU bits == CPU bits; and their
   quantiser (every code space, per tensor and per channel, on values with every special one among them), GPU codes
   and masks == CPU ones.
4. Errors: a raw op call the binding's C++ checks refuse raises in Python, in a child process (a binding built by
   a toolchain whose C++ exceptions cannot unwind into torch ends the process instead: the message says to rebuild
   it with the system's compiler). TensorFlow's kernels refuse by a status: nothing to check there.
5. Speed (unless --no-speed): forward + both gradients of three ResNet-18 CIFAR conv shapes at batch 128 under acc32,
   am16 and am32, as the ratio to the framework's own fp32 convolution (cuDNN) on the same shapes in the same run.

Prints a line per check and exits 1 on any mismatch (2 when no GPU or kernels can be had), so a job script can stop
before training: `python -m ops.selftest || exit 1`.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ops.modes import reference
from ops.modes.multipliers import names
from ops.modes.table_make import write_table
from ops.modes.operands import bits, fast_operands, normal_operands, random_operands, same_bits, special_operands
from ops.selftest_frameworks import CUDNN, FRAMEWORKS

LAYER_TOLERANCE = 1e-5
# (N, H, W, C, O, k, stride, padding, dilation): the shapes the layer check runs
CONV_GEOMETRIES = [(4, 12, 12, 16, 24, 3, 1, "SAME", 1), (4, 12, 11, 16, 24, 3, 2, "SAME", 1),
                   (2, 9, 9, 8, 40, 1, 2, "VALID", 1), (2, 12, 12, 8, 16, 3, 1, "VALID", 2)]
MATMUL_SHAPE = (96, 200, 72)  # M, K, N
# (spatial size, in channels, out channels, stride) of ResNet-18 CIFAR conv layers, timed at batch 128
SPEED_SHAPES = [(32, 64, 64, 1), (16, 128, 256, 2), (8, 256, 256, 1)]
SPEED_MODES = ("acc32", "am16", "am32")


def default_framework() -> str:
    if importlib.util.find_spec("tensorflow") is not None:
        import tensorflow as tf  # only when installed (find_spec above): a torch-only node has none

        if tf.config.list_physical_devices("GPU"):
            return "tensorflow"
    return "torch"


def modes_to_check(table_dir: Path) -> list[str]:
    luts = [f"lut:{write_table(name, table_dir / f'{name}_7.bin')}" for name in ("am16", "mit16", "acc16")]
    return names(include_native=False) + luts


def check_products(framework, mode: str, pairs_per_side: int) -> str | None:
    """None if the GPU's products equal the CPU's bit for bit, else what differed first."""
    specials = special_operands()
    operand_sets = [(specials, specials), (random_operands(pairs_per_side, 1), random_operands(pairs_per_side, 2)),
                    (fast_operands(pairs_per_side, 3), fast_operands(pairs_per_side, 4))]
    for left, right in operand_sets:
        a, b = left[:, None], right[None, :]
        gpu, cpu = framework.matmul(a, b, mode, "gpu"), framework.matmul(a, b, mode, "cpu")
        same = same_bits(gpu, cpu, nan_payloads=True)
        if not same.all():
            i, j = np.argwhere(~same)[0]
            return (f"{int((~same).sum())} of {same.size} products differ; first 0x{bits(left[i]):08x} x "
                    f"0x{bits(right[j]):08x}: GPU 0x{bits(gpu[i, j]):08x}, CPU 0x{bits(cpu[i, j]):08x}")
    return None


def relative_error(out, ref) -> float:
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def check_layers(framework, mode: str) -> tuple[float, str | None]:
    """(the largest relative error of any layer output or gradient, GPU against CPU; what failed, if anything)."""
    worst, failure = 0.0, None
    cases = []
    for index, (n, h, w, c, o, k, stride, padding, dilation) in enumerate(CONV_GEOMETRIES):
        x = normal_operands(n * h * w * c, 10 + index).reshape(n, h, w, c)
        kernel = normal_operands(k * k * c * o, 20 + index).reshape(k, k, c, o)
        ho, wo = (reference.output_size(size, k, stride, dilation, padding)[0] for size in (h, w))
        dy = normal_operands(n * ho * wo * o, 30 + index).reshape(n, ho, wo, o)
        cases.append((f"conv2d {n}x{h}x{w}x{c} k{k} s{stride} {padding} d{dilation}",
                      lambda device, x=x, kernel=kernel, dy=dy, s=stride, p=padding, d=dilation:
                      framework.conv_grads(x, kernel, dy, s, p, d, mode, device)))
    m, k, n = MATMUL_SHAPE
    a, b, dc = (normal_operands(m * k, 40).reshape(m, k), normal_operands(k * n, 41).reshape(k, n),
                normal_operands(m * n, 42).reshape(m, n))
    cases.append((f"matmul {m}x{k}x{n}", lambda device: framework.matmul_grads(a, b, dc, mode, device)))
    for what, run in cases:
        for part, gpu, cpu in zip(("forward", "input gradient", "weight gradient"), run("gpu"), run("cpu")):
            error = relative_error(gpu, cpu)
            worst = max(worst, error)
            if not np.isfinite(error) or error > LAYER_TOLERANCE:
                failure = failure or f"{what} {part}: relative error {error:.2e} > {LAYER_TOLERANCE:.0e}"
    return worst, failure


def check_integer(framework, signed: bool) -> str | None:
    """The integer op on GPU and CPU, every conv geometry: the same bits (integer sums: no order to differ in)."""
    rng = np.random.default_rng(20261128)
    low, high = (-32768, 32767) if signed else (0, 65535)
    table = rng.integers(low, high + 1, 65536).astype(np.int32)
    table[[0, 65535]] = low, high
    for n, h, w, c, o, k, stride, padding, dilation in CONV_GEOMETRIES:
        x = rng.integers(0, 256, (n, h, w, c)).astype(np.uint8)
        weights = rng.integers(0, 256, (k, k, c, o)).astype(np.uint8)
        zero_a = int(rng.integers(-128, 128) if signed else rng.integers(0, 256))
        zero_w = (rng.integers(-128, 128, o) if signed else rng.integers(0, 256, o)).astype(np.int32)
        rescale = (rng.random(o) * 1e-3).astype(np.float32)
        args = (x, weights, table, zero_a, zero_w, rescale, signed, stride, padding, dilation)
        gpu, cpu = framework.int_conv(*args, "gpu"), framework.int_conv(*args, "cpu")
        if not np.array_equal(gpu.view(np.uint32), cpu.view(np.uint32)):
            return (f"{(gpu.view(np.uint32) != cpu.view(np.uint32)).sum()} of {gpu.size} outputs differ on "
                    f"{(n, h, w, c)} x {(k, k, c, o)}, stride {stride}, {padding}, dilation {dilation}")
    return None


# The quantiser's code spaces, (qmin, qmax, zero points' range): signed and unsigned, symmetric and asymmetric.
QUANTISER_CODES = [(-127, 127, (0, 0)), (-128, 127, (-128, 127)), (1, 255, (128, 128)), (0, 255, (0, 255))]


def check_quantiser(framework) -> str | None:
    """The integer modes' quantiser and ranges on GPU and CPU: the same codes and masks, and the same range bits and
    finiteness, per tensor and per last-axis channel, on values over the codes' range and past it with NaN,
    infinities, subnormals and signed zeros among them."""
    rng = np.random.default_rng(20261129)
    specials = np.array([np.nan, np.inf, -np.inf, 1e-40, -1e-40, 0.0, -0.0, 3.4e38, -3.4e38], np.float32)
    for qmin, qmax, (zmin, zmax) in QUANTISER_CODES:
        for channels in (1, 96):
            x = (rng.standard_normal((64, 96)) * 60).astype(np.float32)
            x.reshape(-1)[:specials.size] = specials
            scale = (rng.random(channels) + 0.25).astype(np.float32)
            zero = rng.integers(zmin, zmax + 1, channels).astype(np.float32)
            (gpu_codes, gpu_mask), (cpu_codes, cpu_mask) = (framework.quantise(x, scale, zero, qmin, qmax, device)
                                                            for device in ("gpu", "cpu"))
            if not (np.array_equal(gpu_codes, cpu_codes) and np.array_equal(gpu_mask, cpu_mask)):
                return (f"codes [{qmin}, {qmax}], {channels} scale(s): {(gpu_codes != cpu_codes).sum()} of "
                        f"{x.size} codes and {(gpu_mask != cpu_mask).sum()} masks differ")
            gpu_range, cpu_range = (framework.finite_range(x, channels > 1, device) for device in ("gpu", "cpu"))
            for name, gpu, cpu in zip(("lo", "hi", "finite"), gpu_range, cpu_range):
                if not np.array_equal(gpu.view(np.uint8), cpu.view(np.uint8)):
                    return f"ranges, {channels} channel(s): {name} differs: GPU {gpu[:4]}, CPU {cpu[:4]}, ..."
    return None


def speed_table(framework, repeats: int = 5) -> list[str]:
    lines = [f"{'shape (batch 128)':28s} {'cuDNN fp32':>11s} " + " ".join(f"{m:>13s}" for m in SPEED_MODES)]
    totals = dict.fromkeys((CUDNN, *SPEED_MODES), 0.0)
    for size, cin, cout, stride in SPEED_SHAPES:
        x = normal_operands(128 * size * size * cin, 1).reshape(128, size, size, cin)
        w = normal_operands(9 * cin * cout, 2).reshape(3, 3, cin, cout) * np.float32((2.0 / (9 * cin)) ** 0.5)
        ms = {mode: framework.conv_step_ms(x, w, stride, mode, repeats) for mode in totals}
        for mode, value in ms.items():
            totals[mode] += value
        lines.append(f"{size}x{size} {cin}->{cout} stride {stride:<8d} {ms[CUDNN]:8.2f} ms "
                     + " ".join(f"{ms[m]:7.2f} x{ms[m] / ms[CUDNN]:4.1f}" for m in SPEED_MODES))
    lines.append(f"{'all three':28s} {totals[CUDNN]:8.2f} ms "
                 + " ".join(f"{totals[m]:7.2f} x{totals[m] / totals[CUDNN]:4.1f}" for m in SPEED_MODES))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=sorted(FRAMEWORKS), default=None)
    parser.add_argument("--no-speed", action="store_true", help="skip the speed table")
    parser.add_argument("--pairs-per-side", type=int, default=1000,
                        help="random and fast-path operands per side: each set gives this squared pairs")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    name = args.framework or default_framework()
    try:
        framework = FRAMEWORKS[name]()
    except (ImportError, RuntimeError) as problem:
        print(f"ops.selftest: cannot test the GPU kernels through {name}: {problem}", file=sys.stderr)
        return 2
    print(f"ops.selftest through {name} on {framework.gpu_name()}", flush=True)
    failures = []
    with tempfile.TemporaryDirectory() as table_dir:
        for mode in modes_to_check(Path(table_dir)):
            label = mode if not mode.startswith("lut:") else "lut:" + Path(mode[4:]).name
            product_failure = check_products(framework, mode, args.pairs_per_side)
            worst, layer_failure = check_layers(framework, mode)
            verdict = "ok" if not (product_failure or layer_failure) else "MISMATCH"
            print(f"{label:16s} products {'bit-exact' if not product_failure else 'DIFFER'}, layers max relative "
                  f"error {worst:.1e}: {verdict}", flush=True)
            for failure in (product_failure, layer_failure):
                if failure:
                    print(f"  {label}: {failure}", flush=True)
                    failures.append(f"{label}: {failure}")
    for signed in (True, False):
        label = "int8 codes" if signed else "uint8 codes"
        failure = check_integer(framework, signed)
        print(f"{label:16s} integer op GPU == CPU: {'bit-exact: ok' if not failure else 'MISMATCH'}", flush=True)
        if failure:
            print(f"  {label}: {failure}", flush=True)
            failures.append(f"{label}: {failure}")
    failure = check_quantiser(framework)
    print(f"{'quantiser':16s} codes, masks and ranges GPU == CPU: {'bit-exact: ok' if not failure else 'MISMATCH'}",
          flush=True)
    if failure:
        print(f"  quantiser: {failure}", flush=True)
        failures.append(f"quantiser: {failure}")
    failure = framework.errors_reach_python("gpu")
    print(f"{'errors':16s} a refused op call raises in Python: {'ok' if not failure else 'NO'}", flush=True)
    if failure:
        print(f"  errors: {failure}", flush=True)
        failures.append(f"errors: {failure}")
    if not args.no_speed:
        print("forward + both gradients on the GPU, median of 5 (ratio to cuDNN fp32):")
        print("\n".join(speed_table(framework)))
    print(f"ops.selftest: {'FAILED, ' + str(len(failures)) + ' mismatches' if failures else 'passed'} in "
          f"{time.perf_counter() - started:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
