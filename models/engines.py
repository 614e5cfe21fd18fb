"""The engines a cell trains with: Keras 3's backends the project supports, and choosing one before Keras loads.

    ENGINES, DEFAULT_ENGINE           the one list of engine names (conf/config.yaml `engine`, validated against it)
    select(engine)                    set KERAS_BACKEND for this process; refuses once Keras runs another backend
    import_keras()                    import Keras (and its backend's framework) without its optional integrations

Keras picks its backend once, when `keras` is first imported, from KERAS_BACKEND; a process therefore trains with one
engine, chosen before anything imports Keras (the cell's training process calls select() first thing).
"""
from __future__ import annotations

import os
import sys
from typing import Any

# What Keras 3 imports when it finds it installed, for integrations no cell uses (its scikit-learn wrappers, its
# image-gallery plots through matplotlib.pyplot, pandas frames as model inputs); MLflow installs all three. Hidden from
# Keras' import, TensorFlow with Keras costs 3.5-4.2 CPU s instead of 6.2-6.3 (the 2-core development machine).
# Imported later by anyone, they load as usual: a finished cell draws its learning curves with matplotlib (~0.9 CPU
# s of the saving comes back then); scikit-learn (~0.9) and pandas (~0.4-0.7) a cell never loads.
KERAS_OPTIONAL = ("sklearn", "matplotlib", "pandas")

ENGINES = ("tensorflow", "torch")   # Keras 3 backend names: the ops have a binding for each (ops.keras_ops)
DEFAULT_ENGINE = "tensorflow"


class EngineError(RuntimeError):
    """An engine that cannot be used in this process."""


def select(engine: str) -> None:
    """Make `engine` Keras' backend in this process (before Keras is imported; a no-op if it already is)."""
    if engine not in ENGINES:
        raise EngineError(f"engine={engine!r} is not one of {', '.join(ENGINES)}")
    keras = sys.modules.get("keras")
    if keras is not None:
        current = keras.backend.backend()
        if current != engine:
            raise EngineError(f"engine={engine} asked for, but Keras is already loaded in this process with its "
                              f"{current} backend (KERAS_BACKEND is read once, when keras is first imported)")
        return
    os.environ["KERAS_BACKEND"] = engine
    if engine == "torch":  # cuBLAS is deterministic only with a fixed workspace, set before CUDA starts
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def import_keras() -> Any:
    """Import Keras (with its backend: select() first) without the integrations of KERAS_OPTIONAL; Keras then runs
    without them (its sklearn wrappers and image-gallery plot unavailable, pandas frames not taken as inputs), and the
    modules themselves stay importable. A no-op where Keras is loaded already."""
    if "keras" in sys.modules:
        return sys.modules["keras"]
    hidden = [name for name in KERAS_OPTIONAL if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # an import of it raises ImportError, which Keras takes as "not installed"
    try:
        import keras
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return keras
