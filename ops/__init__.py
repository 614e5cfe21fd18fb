"""AMDNN ops: every multiply of a layer through a simulated hardware multiplier, bit-exact.

The public API, usable from any TensorFlow program (ops knows nothing of models, training or clusters):

    ops.conv2d(x, w, strides=1, padding="SAME", dilations=1, multiplier="am16", exact_gradients=False)
    ops.matmul(a, b, multiplier="am16", exact_gradients=False)
    ops.product(a, b, multiplier)          numpy reference of single products, bit-exact to the definition
    ops.read_table(path) / ops.write_table(table_or_name, path) / ops.make_table(name, m)   ApproxTrain tables
    ops.names() / ops.parse(spec)          the multiplier modes (one list, read by configs, docs and tests)
    ops.path_counts()                      how many GEMM calls took the fast and the generic CPU kernel
    ops.cpu_kernels()                      the CPU kernels' instruction-set level and the modes fast there
    python -m ops.build                    compile the kernels now (normally done on first use)
    python -m ops.describe am16            one mode's error statistics and error map (ops/error_stats.py)

PyTorch users: `from ops import torch_ops` (torch_ops.conv2d / torch_ops.matmul in torch's conventions, CPU and CUDA,
built on first use by ops/torch_build.py). Keras layers: `ops.keras_ops` runs the ops on whichever backend Keras runs
(TensorFlow or torch). On a GPU node: `python -m ops.selftest`. ops itself imports neither TensorFlow nor torch.

Attributes are resolved on first access, so `import ops` stays cheap and TensorFlow loads only when an op is used.
"""

from __future__ import annotations

import importlib

# public name -> module that defines it
_EXPORTS = {
    "conv2d": "ops.api",
    "matmul": "ops.api",
    "names": "ops.multipliers",
    "parse": "ops.multipliers",
    "Multiplier": "ops.multipliers",
    "product": "ops.reference",
    "read_table": "ops.tables",
    "write_table": "ops.tables",
    "make_table": "ops.tables",
    "BuildError": "ops.build",
    "path_counts": "ops.kernel_paths",
    "cpu_kernels": "ops.kernel_paths",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ops' has no attribute {name!r}; public names: {', '.join(__all__)}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
