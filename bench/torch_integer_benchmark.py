"""Speed of the integer modes' layers (Keras on torch) against torch's fp32 ops on the CPU, without TensorFlow.

bench/ops_benchmark.py's integer table for a machine that has torch only (a GPU host's CPUs).

The same shapes, timing, table and levels as bench/ops_benchmark.py (bench/cpu_common.py): for each shape and
integer mode (int8, uint8, each with or without a table: `uint8:ops/luts/evoapprox/mul8u_2AC.int8u.npy`), the
layer's arithmetic as a cell on the torch backend runs it (ops.keras_integer.conv2d / dense: both operands
quantised, the activations by their batch's range, the binding's table op, the rescale; the backward the
straight-through estimator through acc32's products: the conv's gradient kernels, Dense's matmuls) against
torch.nn.functional.conv2d (oneDNN) and torch.matmul (MKL's sgemm in torch's x86 wheels) on the same data. Each side reads the data in its own layout: the
integer layers NHWC activations and HWIO weights; torch's conv the same activations as an NCHW view, which is
channels_last, and the weights copied once into channels_last OIHW, the layouts oneDNN's conv reads without
reordering the activations (NCHW-contiguous ones cost a reorder each way: 15-30 % more at 32x32x64 and 16x16x128 on
the 2-core AVX2 EPYC). Eager torch on CPU tensors, Python's overhead included as in a training step: forward under
torch.no_grad, and forward + both gradients through autograd (output gradients all ones; the output and both
gradients returned). Median of repeats, native and simulated interleaved; each mode's conv layer is first checked bit
for bit against ops/modes/integer_reference.py, so nothing wrong is timed.

    python -m ops.build --torch      # the binding, built for this CPU (AMDNN_OPS_TARGET for a lower level)
    python -m bench.torch_integer_benchmark [--modes int8,uint8] [--repeats 7] [--threads N] [--write FILE]
    python -m bench.torch_integer_benchmark --levels x86-64-v4 --write docs/performance.md

--levels runs it once per CPU level, each in its own process with the binding built for that level
(AMDNN_OPS_TARGET) and torch's libraries limited to the same instruction set before they first run: oneDNN
(ONEDNN_MAX_CPU_ISA, bench/cpu_common.ONEDNN_ISA), MKL (MKL_ENABLE_INSTRUCTIONS) and ATen's own vector kernels,
which run the quantisation passes (ATEN_CPU_CAPABILITY). --write replaces the table between the markers
`<!-- torch integer table begin: LEVEL -->` and `... end: LEVEL -->`. The stamp above it gives the instruction set
oneDNN reports itself (ONEDNN_VERBOSE's header), so a limit that did not take shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

os.environ["KERAS_BACKEND"] = "torch"  # read when Keras is first imported
os.environ["KERAS_TORCH_DEVICE"] = "cpu"  # a CPU benchmark, also on a GPU host (Keras' torch backend prefers CUDA)

import keras  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.cpu_common import (ONEDNN_ISA, Benchmark, cpu_model, integer_ops, is_integer, layer_data,  # noqa: E402
                              parser, verify_integer_layer)

if keras.backend.backend() != "torch":
    raise ImportError(f"Keras already runs on {keras.backend.backend()!r} in this process; run "
                      "bench.torch_integer_benchmark in its own process (python -m bench.torch_integer_benchmark)")

# Each level's limit for torch's other libraries, beside oneDNN's (ONEDNN_ISA); None: the library's own best.
MKL_ISA = {"x86-64-v4-vbmi": None, "x86-64-v4": "AVX512", "x86-64-v3": "AVX2", "x86-64-v2": "SSE4_2",
           "x86-64": "SSE4_2"}
ATEN_ISA = {"x86-64-v4-vbmi": None, "x86-64-v4": "avx512", "x86-64-v3": "avx2", "x86-64-v2": "default",
            "x86-64": "default"}
LIMITS = {"ONEDNN_MAX_CPU_ISA": ONEDNN_ISA, "MKL_ENABLE_INSTRUCTIONS": MKL_ISA, "ATEN_CPU_CAPABILITY": ATEN_ISA}
# A conv that torch gives to oneDNN (batch > 1), run with ONEDNN_VERBOSE=1 to read the ISA oneDNN settled on.
ONEDNN_PROBE = "import torch; torch.nn.functional.conv2d(torch.ones(2, 8, 8, 8), torch.ones(8, 8, 3, 3))"


def verify(multiplier: str) -> None:
    if not is_integer(multiplier):
        raise SystemExit(f"{multiplier}: this benchmark times the integer modes (int8, uint8, ... with or without "
                         ":<table>); the float modes are bench.ops_benchmark's")
    conv = integer_ops(multiplier)[0]
    verify_integer_layer(multiplier, lambda x, w: conv(torch.from_numpy(x), torch.from_numpy(w)).detach().numpy())


def layer_functions(kind: str, shape, multiplier: str | None):
    """(forward, forward+backward) over fixed random CPU tensors; multiplier None = torch's native op."""
    x, w = (torch.from_numpy(array) for array in layer_data(kind, shape))  # NHWC and HWIO, or [B, K] and [K, N]
    if multiplier is not None:
        op = integer_ops(multiplier)[0 if kind == "conv" else 1]
    elif kind == "conv":
        x, w = x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)
        op = lambda p, q: F.conv2d(p, q, padding="same")
    else:
        op = torch.matmul
    x, w = x.detach().requires_grad_(), w.detach().requires_grad_()

    def forward():
        with torch.no_grad():
            return op(x, w)

    def forward_backward():
        y = op(x, w)
        return y, *torch.autograd.grad(y, (x, w), torch.ones_like(y))

    return forward, forward_backward


def onednn_isa() -> str:
    """The instruction set oneDNN runs at in this environment, from its own verbose header (e.g. "Intel AVX2")."""
    probe = subprocess.run([sys.executable, "-c", ONEDNN_PROBE], env={**os.environ, "ONEDNN_VERBOSE": "1"},
                           capture_output=True, text=True)
    match = re.search(r"info,cpu,isa:(.*)", probe.stdout)
    return match.group(1).strip() if match else "not reported"


def machine() -> str:
    from ops.torch_binding.ops import BUILD  # here, not at the top: --help builds nothing

    limits = ", ".join(f"{variable}={os.environ[variable]}" for variable in LIMITS if variable in os.environ)
    return (f"{cpu_model()}, {os.cpu_count()} cores ({torch.get_num_threads()} used), torch {torch.__version__}, "
            f"kernels: {BUILD.target}, oneDNN ISA: {onednn_isa()}, ATen: {torch.backends.cpu.get_cpu_capability()}"
            f" ({limits or 'no limits set'})")


def main() -> None:
    arguments = parser(__doc__.splitlines()[0], "int8,uint8", "comma-separated integer modes (int8, uint8:FILE, ...)")
    arguments.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                           help="torch.set_num_threads: oneDNN's, MKL's and ATen's threads and the binding's "
                                "at::parallel_for (default: every core this process may run on)")
    args = arguments.parse_args()
    torch.set_num_threads(args.threads)
    Benchmark("bench.torch_integer_benchmark", "torch integer table", LIMITS, verify, layer_functions,
              machine).run(args, ["--threads", str(args.threads)])


if __name__ == "__main__":
    main()
