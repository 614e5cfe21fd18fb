"""Loading the compiled ops: build on first use (ops.build), load once per process, register the gradients."""

from __future__ import annotations

import threading

from ops.build import BuildError, build

_lock = threading.Lock()
_library = None


def library():
    """The loaded op library (its functions are amdnn_conv2d, amdnn_mat_mul, ...), built first if needed."""
    global _library
    with _lock:
        if _library is None:
            import tensorflow as tf

            info = build()
            try:
                _library = tf.load_op_library(info.library)
            except (tf.errors.NotFoundError, OSError) as error:
                raise BuildError(
                    f"the ops library {info.library} (built for TensorFlow {info.tensorflow}, target {info.target}) "
                    f"does not load into this TensorFlow {tf.__version__}: {error}. Rebuild it with "
                    "`python -m ops.build --force`.") from error
            from ops import gradients  # noqa: F401  (registers the gradient functions of the loaded ops)
    return _library
