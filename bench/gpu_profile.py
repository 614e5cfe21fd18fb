"""One ResNet-18 conv shape, forward and both gradients, once per mode: the workload to put under a GPU profiler.

    ncu --kernel-name regex:gemm_kernel --section SpeedOfLight ... python bench/gpu_profile.py --modes acc32,am16
    python bench/gpu_profile.py --modes acc32,am16 --shape 16,128,128,1 --time   # per-kernel CUDA-event times

Warm-up calls (the binding's first build and cuDNN's algorithm search) run before the profiled region, which is
bracketed by cudaProfilerStart/Stop so that `ncu --profile-from-start off` sees only the measured calls.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_benchmark import BATCH, make_inputs  # noqa: E402
from ops import torch_ops  # noqa: E402
from ops.selftest_frameworks import cuda_median_ms  # noqa: E402


def passes(mode: str, x, w, stride: int):
    """Forward, input gradient and filter gradient of one conv, each a callable."""
    y = torch_ops.conv2d(x, w, stride=stride, padding=1, multiplier=mode)
    dy = torch.randn_like(y)
    return {
        "fwd": lambda: torch_ops.conv2d(x, w, stride=stride, padding=1, multiplier=mode),
        "dx": lambda: torch.autograd.grad(torch_ops.conv2d(x, w, stride=stride, padding=1, multiplier=mode), x, dy),
        "dw": lambda: torch.autograd.grad(torch_ops.conv2d(x, w, stride=stride, padding=1, multiplier=mode), w, dy),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="acc32,am16")
    parser.add_argument("--shape", default="16,128,128,1", help="spatial size, in channels, out channels, stride")
    parser.add_argument("--time", action="store_true", help="print CUDA-event medians instead of profiling once")
    args = parser.parse_args()
    size, cin, cout, stride = (int(v) for v in args.shape.split(","))
    x, w = make_inputs(size, cin, cout, stride)
    calls = {mode: passes(mode, x, w, stride) for mode in args.modes.split(",")}
    for by_pass in calls.values():
        for fn in by_pass.values():
            fn()
    torch.cuda.synchronize()
    if args.time:
        print(f"shape {args.shape}, batch {BATCH}: ms (median of 20; dx and dw include the forward)")
        for mode, by_pass in calls.items():
            print(mode, " ".join(f"{name} {cuda_median_ms(fn, 20):.3f}" for name, fn in by_pass.items()))
        return 0
    torch.cuda.cudart().cudaProfilerStart()
    for by_pass in calls.values():
        for fn in by_pass.values():
            fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
