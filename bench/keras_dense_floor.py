"""The eager floor under the torch integer table's dense rows: Keras' own fp32 Dense on the torch backend against
torch.matmul, the op those rows are timed against, on the same LeNet-300-100 shapes (bench/cpu_common.DENSE_SHAPES).

A Keras layer called eagerly on torch pays Python and dispatch costs per call that these small matmuls do not: the
ratio here is what any Keras layer, float or integer, starts from on these rows. Forward under torch.no_grad, and
forward + backward through autograd (the sum's gradient), median of repeats of spans of calls, CPU tensors, every
thread of the process (torch.set_num_threads). Needs torch and Keras, not the ops:

    python -m bench.keras_dense_floor [--repeats 7] [--calls 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import torch  # noqa: E402

from bench.cpu_common import DENSE_SHAPES  # noqa: E402


def median_ms(fn, calls: int, repeats: int) -> float:
    """The median over `repeats` spans of `calls` calls of fn, in ms a call, after one untimed call."""
    fn()
    spans = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        spans.append((time.perf_counter() - start) / calls * 1e3)
    return statistics.median(spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    if keras.backend.backend() != "torch":
        raise SystemExit(f"KERAS_BACKEND is {keras.backend.backend()!r}: this measures Keras on torch; unset it")
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, Keras {keras.__version__}, {torch.get_num_threads()} threads")
    print("| shape | torch.matmul fwd ms | Keras Dense fwd ms | ratio | torch.matmul fwd+bwd ms | Keras Dense fwd+bwd ms "
          "| ratio |\n|---|---|---|---|---|---|---|")
    for name, (batch, n_in, n_out) in DENSE_SHAPES.items():
        x = torch.randn(batch, n_in)
        x_grad = x.clone().requires_grad_(True)
        w = torch.randn(n_in, n_out, requires_grad=True)
        layer = keras.layers.Dense(n_out, use_bias=False)
        layer.build((batch, n_in))

        def matmul_forward():
            with torch.no_grad():
                torch.matmul(x, w)

        def matmul_both():
            torch.matmul(x_grad, w).sum().backward()

        def dense_forward():
            with torch.no_grad():
                layer(x)

        def dense_both():
            layer(x_grad).sum().backward()

        times = [median_ms(fn, args.calls, args.repeats)
                 for fn in (matmul_forward, dense_forward, matmul_both, dense_both)]
        print(f"| {name} | {times[0]:.3f} | {times[1]:.3f} | {times[1] / times[0]:.1f}x | {times[2]:.3f} | "
              f"{times[3]:.3f} | {times[3] / times[2]:.1f}x |")


if __name__ == "__main__":
    main()
