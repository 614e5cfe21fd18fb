"""GPU kernels against cuDNN on the seven ResNet-18 CIFAR 3x3 conv shapes at batch 128 (run on a GPU machine).

    python bench/gpu_benchmark.py [--modes acc32,am16,...] [--repeats 15] [--calls 10] [--json out.json]

For every mode: forward and forward+backward (both gradients through the multiplier) summed over the seven shapes,
each timed with CUDA events (median of --repeats spans of --calls back-to-back calls, after warm-up; each span starts
behind an untimed call, so that the host's Python and autograd work overlaps the kernels of the call before, as in
training, instead of counting as the GPU's wait before the first kernel: ops.selftest_frameworks.cuda_median_ms;
through 2026-11-25 that wait, ~0.2-0.3 ms a span, was in the tables, divided by --calls), as ratios to cuDNN fp32
(TF32 off) and cuDNN TF32 (TensorFlow's default on Ampere and later) measured in the same run; plus the achieved
simulated products per second (2 flops each) against the GPU's measured FP32 FMA rate (a large cuBLAS SGEMM). Every
kernel is verified by tests/device before it is timed here.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ops import torch_ops  # noqa: E402
from ops.modes.multipliers import names  # noqa: E402
from ops.selftest_frameworks import cuda_median_ms as median_ms  # noqa: E402

BATCH = 128
# (spatial size, in channels, out channels, stride) of ResNet-18's 3x3 convs on CIFAR-10
SHAPES = [(32, 64, 64, 1), (32, 64, 128, 2), (16, 128, 128, 1), (16, 128, 256, 2), (8, 256, 256, 1),
          (8, 256, 512, 2), (4, 512, 512, 1)]


def products(size: int, cin: int, cout: int, stride: int) -> int:
    out = -(-size // stride)
    return BATCH * out * out * cout * 9 * cin


def make_inputs(size, cin, cout, stride):
    x = torch.randn(BATCH, cin, size, size, device="cuda").to(memory_format=torch.channels_last)
    w = torch.randn(cout, cin, 3, 3, device="cuda") * (2.0 / (9 * cin)) ** 0.5
    return x.requires_grad_(), w.requires_grad_()


def timing(conv, shape, repeats: int, calls: int) -> tuple[float, float]:
    x, w = make_inputs(*shape)
    stride = shape[3]
    y = conv(x, w, stride)
    dy = torch.randn_like(y)
    forward = median_ms(lambda: conv(x, w, stride), repeats, calls=calls)
    both = median_ms(lambda: torch.autograd.grad(conv(x, w, stride), (x, w), dy), repeats, calls=calls)
    return forward, both


def fp32_peak_tflops() -> float:
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(8192, 8192, device="cuda")
    ms = median_ms(lambda: a @ a, 5)
    return 2 * 8192**3 / ms / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(names(include_native=False)))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10, help="back-to-back calls per timed span")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    peak = fp32_peak_tflops()
    total_products = sum(products(*s) for s in SHAPES)

    def cudnn(tf32: bool):
        def conv(x, w, stride):
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.nn.functional.conv2d(x, w, stride=stride, padding=1)
        return conv

    rows = {}
    for label, conv in (("cudnn-fp32", cudnn(False)), ("cudnn-tf32", cudnn(True))):
        per_shape = [timing(conv, s, args.repeats, args.calls) for s in SHAPES]
        rows[label] = (sum(f for f, _ in per_shape), sum(b for _, b in per_shape), per_shape)
    torch.backends.cudnn.allow_tf32 = False
    for mode in args.modes.split(","):
        def conv(x, w, stride, mode=mode):
            return torch_ops.conv2d(x, w, stride=stride, padding=1, multiplier=mode)
        per_shape = [timing(conv, s, args.repeats, args.calls) for s in SHAPES]
        rows[mode] = (sum(f for f, _ in per_shape), sum(b for _, b in per_shape), per_shape)

    fp32_f, fp32_b, _ = rows["cudnn-fp32"]
    tf32_f, tf32_b, _ = rows["cudnn-tf32"]
    device = torch.cuda.get_device_name()
    print(f"\n{device}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}; FP32 FMA peak measured "
          f"{peak:.1f} TFLOP/s (cuBLAS SGEMM 8192^3); batch {BATCH}, median of {args.repeats} spans of {args.calls} "
          "calls")
    print("| kernel | fwd ms | fwd+bwd ms | fwd / fp32 | fwd+bwd / fp32 | fwd+bwd / tf32 | TFLOP/s-eq fwd+bwd | % of peak |")
    print("|---|---|---|---|---|---|---|---|")
    for label, (f, b, _) in rows.items():
        tflops = 3 * 2 * total_products / b / 1e9
        print(f"| {label} | {f:.2f} | {b:.2f} | {f / fp32_f:.2f}x | {b / fp32_b:.2f}x | {b / tf32_b:.2f}x | "
              f"{tflops:.1f} | {100 * tflops / peak:.0f} % |")
    print("\nper shape, fwd+bwd ms (size/cin/cout/stride):")
    print("| kernel | " + " | ".join(f"{s[0]}/{s[1]}/{s[2]}/{s[3]}" for s in SHAPES) + " |")
    for label, (_, _, per_shape) in rows.items():
        print(f"| {label} | " + " | ".join(f"{b:.3f}" for _, b in per_shape) + " |")
    if args.json:
        args.json.write_text(json.dumps({"device": device, "peak_tflops": peak, "calls": args.calls, "rows": rows},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
