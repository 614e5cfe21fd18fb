"""Loading the compiled TensorFlow ops: build on first use (ops.build), load once per process.

The ops' gradients are registered by ops.tf_binding.gradients, which ops.tf_binding.api imports: the public ops
have them, and this module stays below them. Where TensorFlow sees a GPU, the CUDA-enabled library is loaded (CPU
and GPU kernels, ops/build/cuda.py): built for the visible GPU with nvcc when there is one that can, else an
existing CUDA build in the cache that covers the GPU (e.g. built on the login node); with neither, a BuildError says
how to build it, never a silent fall back to CPU kernels. A machine without a GPU loads the CPU-only library.
"""

from __future__ import annotations

import json
import threading

from ops.build import cuda as cuda_build
from ops.build.common import BuildError, cache_root, cpu_target, source_hash
from ops.build.tf_library import BuildInfo, build

_lock = threading.Lock()
_library = None
_loaded: BuildInfo | None = None


def _cuda_build(tf) -> BuildInfo:
    """The CUDA-enabled library for the visible GPU (see the module docstring)."""
    try:
        cuda = cuda_build.config()  # fails without nvcc, or with one that cannot compile for this GPU (V100, CUDA 13)
    except BuildError as problem:
        found = cuda_build.existing_build(cache_root(), source_hash(), tf.__version__, cpu_target()[0])
        if found is None:
            raise BuildError(f"TensorFlow sees a GPU ({tf.config.list_physical_devices('GPU')[0].name}) but the cache "
                             f"{cache_root()} holds no CUDA build of these ops for it, and none can be built "
                             f"here: {problem}") from problem
        return BuildInfo(**json.loads(found.read_text()))
    return build(cuda=cuda)


def library():
    """The loaded op library (its functions are amdnn_conv2d, amdnn_mat_mul, ...), built first if needed."""
    global _library, _loaded
    with _lock:
        if _library is None:
            import tensorflow as tf  # here, not at the top: importing this module (run_facts) loads no TensorFlow

            info = _cuda_build(tf) if tf.config.list_physical_devices("GPU") else build()
            try:
                _library = tf.load_op_library(info.library)
            except (tf.errors.NotFoundError, OSError) as error:
                flags = " --cuda" if info.cuda_arch else ""
                raise BuildError(
                    f"the ops library {info.library} (built for TensorFlow {info.tensorflow}, target {info.target}"
                    f"{', CUDA ' + str(info.cuda) + ' ' + info.cuda_arch if info.cuda_arch else ''}) does not load "
                    f"into this TensorFlow {tf.__version__}: {error}. Rebuild it with "
                    f"`python -m ops.build{flags} --force`.") from error
            _loaded = info
    return _library


def loaded_build() -> BuildInfo | None:
    """What library() loaded in this process (None before the first op): its cache folder names the build."""
    return _loaded
