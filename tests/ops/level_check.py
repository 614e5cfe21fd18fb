"""Run by test_kernel_targets.py in a subprocess with AMDNN_OPS_TARGET set: one CPU level's library, every mode.

    python -m tests.ops.level_check LEVEL OUT.npz       (from the repository's root)

Checks single products of every mode (matmul on the special, random and fast operand sets; both conv gradients on
the fast set) bit for bit against the numpy reference, then computes a small layer of every op (conv2d, both
gradients, matmul) of every mode, on operands of the fast kernel's range and once more with one underflowing value
(which sends only the blocks that read it to the generic kernel), and saves the outputs and the path counts to
OUT.npz for the test to compare across levels. Exits non-zero with the reason on any mismatch.
"""

from __future__ import annotations

import json
import sys

import numpy as np

import ops
from ops.build import build

from tests.ops.kernels import (OPERANDS, assert_gradient_products, assert_products, fast_path_operands, kernel_modes,
                               raw_conv_backprop_filter, raw_conv_backprop_input, raw_matmul)

# Sizes that reach every part of the skeleton at every level: patch 3*3*24 = 216 and k = 150 span two K blocks of
# 128; 20 and 45 output columns leave edge tiles for 16- and 32-lane panels; 98 and 37 rows edge tiles of 6.
X_SHAPE, W_SHAPE = (2, 7, 7, 24), (3, 3, 24, 20)
A_SHAPE, B_SHAPE = (37, 150), (150, 45)
TINY = np.float32(1e-37)  # biased exponent 4: its products with O(1) values underflow


def layer_operands():
    # The fast set's mantissas and zeros with biased exponents 100..149: products and their sums stay finite.
    bits = fast_path_operands(4000, seed=11).view(np.uint32)
    exponent = (bits >> 23) & 0xFF
    exponent = np.where(exponent == 0, 0, 100 + exponent % 50).astype(np.uint32)
    values = ((bits & np.uint32(0x807FFFFF)) | (exponent << 23)).view(np.float32)
    rng = np.random.default_rng(12)
    take = lambda shape: rng.choice(values, int(np.prod(shape))).reshape(shape).astype(np.float32)
    return {"x": take(X_SHAPE), "w": take(W_SHAPE), "dy": take(X_SHAPE[:3] + W_SHAPE[3:]),
            "a": take(A_SHAPE), "b": take(B_SHAPE)}


def layer_outputs(mode: str, t: dict) -> dict[str, np.ndarray]:
    return {
        "conv2d": ops.conv2d(t["x"], t["w"], 1, "SAME", 1, mode).numpy(),
        "input_grad": raw_conv_backprop_input(X_SHAPE, t["w"], t["dy"], mode, padding="SAME"),
        "filter_grad": raw_conv_backprop_filter(t["x"], W_SHAPE, t["dy"], mode, padding="SAME"),
        "matmul": raw_matmul(t["a"], t["b"], mode),
    }


def delta(before: dict, after: dict) -> dict:
    return {key: after[key] - before[key] for key in after}


def main(level: str, out: str) -> None:
    assert build().target == level, (build().target, level)
    for mode in kernel_modes():
        for left, right in OPERANDS.values():
            assert_products(ops.matmul(left[:, None], right[None, :], multiplier=mode).numpy(), left, right, mode)
        assert_gradient_products(mode, *OPERANDS["fast"])
    ordinary = layer_operands()
    mixed = {key: value.copy() for key, value in ordinary.items()}
    for key in ("x", "dy", "a"):
        mixed[key].reshape(-1)[5] = TINY
    results, counts = {}, {}
    for index, mode in enumerate(kernel_modes()):
        for case, operands in (("ordinary", ordinary), ("mixed", mixed)):
            before = ops.path_counts()
            for op, value in layer_outputs(mode, operands).items():
                results[f"{index}/{case}/{op}"] = value
            counts[f"{mode}/{case}"] = delta(before, ops.path_counts())
    np.savez(out, **results)
    print("KERNELS", json.dumps(ops.cpu_kernels()))
    print("COUNTS", json.dumps(counts))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
