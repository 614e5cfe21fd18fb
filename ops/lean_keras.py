"""Keras without the scikit-learn and matplotlib it would import for wrappers and plots this project never uses.

Keras 3 imports scikit-learn (its `keras.wrappers` for sklearn estimators) and matplotlib.pyplot (`keras.visualization`)
at import time whenever they are installed, and MLflow installs both. That is about 3 of the 10 CPU seconds of
`import tensorflow, keras` (user + sys 9.2-10.5 s without, 7.2-7.4 s with this; three runs each, 2-core AMD EPYC,
Python 3.11, TF 2.21, Keras 3.15), paid by every cell process at its start (on a cluster, in thousands of small files
read from a shared file system) and by the test suite's ~100 TensorFlow processes. `install()` (called by `import ops`, before any project module imports Keras) puts a finder first
on sys.meta_path that declines exactly those imports: made by a Keras module's body while it is being imported. Keras
treats them as not installed (its sklearn wrappers and image-gallery plots then say so if called); an import of
scikit-learn or matplotlib from anywhere else, including a Keras function at call time, works as usual.
"""

from __future__ import annotations

import importlib.abc
import sys

DECLINED = ("sklearn", "matplotlib")  # top-level package names Keras imports optionally at import time


def _importer_is_a_keras_module_body() -> bool:
    """Whether the code asking for the import (the first frame outside importlib) is a Keras module being imported."""
    frame = sys._getframe(2)  # noqa: SLF001 - the import statement's frame lies above importlib's
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back
    if frame is None or frame.f_code.co_name != "<module>":
        return False
    name = frame.f_globals.get("__name__", "")
    return name == "keras" or name.startswith("keras.")


class _KerasOptionalImports(importlib.abc.MetaPathFinder):
    """Declines DECLINED packages to Keras's module bodies (ModuleNotFoundError, as if not installed)."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002 - the finder protocol's signature
        if fullname in DECLINED and _importer_is_a_keras_module_body():
            raise ModuleNotFoundError(f"{fullname} is not imported for Keras here (ops/lean_keras.py)", name=fullname)
        return None


def install() -> None:
    """Puts the finder first on sys.meta_path, once a process."""
    if not any(isinstance(finder, _KerasOptionalImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasOptionalImports())
