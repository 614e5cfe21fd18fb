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

from ops import lean_keras

# Keras 3's optional integrations, declined to its import (the one list and why: ops/lean_keras.py).
KERAS_OPTIONAL = lean_keras.KERAS_OPTIONAL

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
    """Import Keras (with its backend: select() first) without the integrations of KERAS_OPTIONAL (ops/lean_keras.py);
    the modules themselves stay importable. A no-op where Keras is loaded already."""
    import keras  # the finder is in place: importing this module imported ops, which installs it

    return keras
