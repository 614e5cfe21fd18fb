"""The integer modes' forward conv (torch.ops.amdnn.int_conv2d) against cuDNN fp32 on the seven ResNet-18 CIFAR 3x3
conv shapes at batch 128 (run on a GPU machine, after tests/device/test_gpu_integer.py has checked the kernel).

    python bench/gpu_integer_benchmark.py [--repeats 15] [--calls 10] [--json out.json]

Per shape and in all: the forward of int8 codes (a random int16 table) and of uint8 codes (uint16), and the layer's
forward+backward, the integer forward plus the two acc32 gradient kernels (torch.ops.amdnn.conv2d_backward_input and
_filter, one after the other), against cuDNN fp32 (TF32 off) forward and forward+backward (torch.autograd.grad for x
and w) measured in the same run; CUDA events, median of --repeats spans of --calls calls, each span behind an
untimed call (ops.selftest_frameworks.cuda_median_ms, as bench/gpu_benchmark.py). The quantisation of x and w (the
layer's range, quantise and dequantise passes) is not in these times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_benchmark import BATCH, SHAPES, products  # noqa: E402
from ops import torch_ops  # noqa: E402
from ops.selftest_frameworks import cuda_median_ms as median_ms  # noqa: E402


def int_operands(size: int, cin: int, cout: int, signed: bool):
    """Random NHWC / HWIO codes, a table of the kind's range, zero points and rescales on the GPU."""
    rng = np.random.default_rng(size * cin + cout)
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    qmin, qmax = (-128, 127) if signed else (0, 255)

    def gpu(array):
        return torch.as_tensor(array).cuda()

    return (gpu(rng.integers(0, 256, (BATCH, size, size, cin), dtype=np.uint8)),
            gpu(rng.integers(0, 256, (3, 3, cin, cout), dtype=np.uint8)),
            gpu(rng.integers(lo, hi + 1, 65536).astype(np.int32)),
            gpu(np.array([rng.integers(qmin, qmax + 1)], np.int32)),
            gpu(rng.integers(qmin, qmax + 1, cout).astype(np.int32)),
            gpu((10.0 ** rng.uniform(-6, -3, cout)).astype(np.float32)))


def time_shape(shape, signed_kinds, repeats: int, calls: int) -> dict[str, tuple[float, float]]:
    """{kernel: (forward ms, forward+backward ms)} of one shape."""
    size, cin, cout, stride = shape
    x = torch.randn(BATCH, cin, size, size, device="cuda").to(memory_format=torch.channels_last).requires_grad_()
    w = (torch.randn(cout, cin, 3, 3, device="cuda") * (2.0 / (9 * cin)) ** 0.5).requires_grad_()
    dy = torch.randn_like(F.conv2d(x, w, stride=stride, padding=1))
    rows = {"cudnn-fp32": (median_ms(lambda: F.conv2d(x, w, stride=stride, padding=1), repeats, calls=calls),
                           median_ms(lambda: torch.autograd.grad(F.conv2d(x, w, stride=stride, padding=1), (x, w), dy),
                                     repeats, calls=calls))}
    attr, table = torch_ops.kernel_arguments_for("acc32", torch.device("cuda"))
    geometry = ([stride, stride], [1, 1, 1, 1], [1, 1])
    xd, wd = x.detach(), w.detach()

    def backward():
        torch.ops.amdnn.conv2d_backward_input(list(x.shape), wd, dy, table, attr, *geometry)
        torch.ops.amdnn.conv2d_backward_filter(xd, list(w.shape), dy, table, attr, *geometry)

    for signed in signed_kinds:
        operands = int_operands(size, cin, cout, signed)

        def forward(operands=operands, signed=signed):
            return torch.ops.amdnn.int_conv2d(*operands, signed, *geometry)

        def both(forward=forward):
            forward()
            backward()

        rows["int8" if signed else "uint8"] = (median_ms(forward, repeats, calls=calls),
                                               median_ms(both, repeats, calls=calls))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="back-to-back calls per timed span")
    parser.add_argument("--kinds", default="int8,uint8", help="int8 (signed codes), uint8 (unsigned) or both")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    kinds = [kind == "int8" for kind in args.kinds.split(",")]
    per_shape = [time_shape(shape, kinds, args.repeats, args.calls) for shape in SHAPES]
    labels = list(per_shape[0])
    total = {label: (sum(s[label][0] for s in per_shape), sum(s[label][1] for s in per_shape)) for label in labels}
    fp32_f, fp32_b = total["cudnn-fp32"]
    all_products = sum(products(*shape) for shape in SHAPES)
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M %Z')}; "
          f"batch {BATCH}, median of {args.repeats} spans of {args.calls} calls")
    print("| kernel | fwd ms | fwd+bwd ms | fwd / cuDNN fp32 | fwd+bwd / cuDNN fp32 | fwd T products/s |")
    print("|---|---|---|---|---|---|")
    for label, (f, b) in total.items():
        print(f"| {label} | {f:.2f} | {b:.2f} | {f / fp32_f:.2f}x | {b / fp32_b:.2f}x | {all_products / f / 1e9:.2f} |")
    print("\nper shape, fwd ms / fwd+bwd ms (size/cin/cout/stride):")
    print("| kernel | " + " | ".join(f"{s[0]}/{s[1]}/{s[2]}/{s[3]}" for s in SHAPES) + " |")
    print("|---|" + "---|" * len(SHAPES))
    for label in labels:
        print(f"| {label} | " + " | ".join(f"{s[label][0]:.3f} / {s[label][1]:.3f}" for s in per_shape) + " |")
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "total": total,
                                         "per_shape": per_shape}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
