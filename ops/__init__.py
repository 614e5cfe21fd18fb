"""AMDNN ops: every multiply of a layer through a simulated hardware multiplier, bit-exact.

The public API, usable from any TensorFlow program (ops knows nothing of models, training or clusters):

    ops.conv2d(x, w, strides=1, padding="SAME", dilations=1, multiplier="am16", exact_gradients=False)
    ops.matmul(a, b, multiplier="am16", exact_gradients=False)
    ops.product(a, b, multiplier)          numpy reference of single products, bit-exact to the definition
    ops.read_table(path) / ops.write_table(table_or_name, path) / ops.make_table(name, m)   ApproxTrain tables
    ops.names() / ops.parse(spec)          the multiplier modes (one list, read by configs, docs and tests)
    ops.NATIVE                             the name of the framework's own layers ("native")
    ops.path_counts()                      how many GEMM calls took the fast and the generic CPU kernel
    ops.cpu_kernels()                      the CPU kernels' instruction-set level and the modes fast there
    python -m ops.build                    compile the kernels now (normally done on first use); --torch: PyTorch's
    python -m ops.describe am16            one mode's error statistics and error map (ops/modes/describe.py)

PyTorch users: `from ops import torch_ops` (torch_ops.conv2d / torch_ops.matmul in torch's conventions, CPU and CUDA,
built on first use by ops/build/torch_library.py; the module is ops.torch_binding.ops). Keras layers: `ops.keras_ops`
runs the ops on whichever backend Keras runs (TensorFlow or torch). On a GPU node: `python -m ops.selftest`.
ops itself imports neither TensorFlow nor torch.

The rooms, bottom up (each imports only those below it; tests/test_layering.py checks):
    atomic                    atomic file writes (no other ops module)
    lean_keras                Keras's import without scikit-learn, matplotlib and pandas (`import ops` installs it)
    modes/                    the modes, their numpy reference, tables, error statistics (numpy only)
    build/                    building the libraries: common parts, TensorFlow (+ CUDA), PyTorch; the build command
    tf_binding/, torch_binding/   loading them into a framework, the public ops, gradients/autograd
    describe, torch_build     the commands `python -m ops.describe` (an entry point of ops.modes.describe) and
                              `python -m ops.torch_build` (the older name of `python -m ops.build --torch`)
    torch_ops                 `import ops.torch_ops`: the older module name of torch_binding/ops
    keras_ops, selftest_frameworks   the ops on Keras' backend; the self-test's two frameworks
    selftest                  `python -m ops.selftest`: the GPU self-test over both bindings

Attributes are resolved on first access, so `import ops` stays cheap and TensorFlow loads only when an op is used.
"""

from __future__ import annotations

import importlib

from ops import lean_keras

lean_keras.install()  # before any of the project's modules imports Keras: see ops/lean_keras.py

# public name -> module that defines it
_EXPORTS = {
    "conv2d": "ops.tf_binding.api",
    "matmul": "ops.tf_binding.api",
    "names": "ops.modes.multipliers",
    "parse": "ops.modes.multipliers",
    "Multiplier": "ops.modes.multipliers",
    "NATIVE": "ops.modes.multipliers",
    "product": "ops.modes.reference",
    "read_table": "ops.modes.table_files",
    "write_table": "ops.modes.table_make",
    "make_table": "ops.modes.table_make",
    "BuildError": "ops.build.common",
    "path_counts": "ops.tf_binding.kernel_paths",
    "cpu_kernels": "ops.tf_binding.kernel_paths",
}
# public module name -> the module it names: `from ops import torch_ops` is the PyTorch binding's ops
_MODULES = {"torch_ops": "ops.torch_binding.ops"}

__all__ = sorted([*_EXPORTS, *_MODULES])


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ops' has no attribute {name!r}; public names: {', '.join(__all__)}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
