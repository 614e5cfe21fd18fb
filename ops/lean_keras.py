"""Keras without the scikit-learn, matplotlib and pandas it would import for integrations this project never uses.

Keras 3 imports them at import time whenever they are installed, and MLflow installs all three: scikit-learn for its
sklearn estimator wrappers, matplotlib.pyplot for its image-gallery plots, pandas to take frames as model inputs.
Declined, `import tensorflow, keras` costs 3.5-4.2 CPU s instead of 6.2-6.3 (2026-11-29, the 2-core AMD EPYC of
that morning) or 7.2-7.4 instead of 9.2-10.5 (the same kind of machine that afternoon), paid by every training
process at its start (on a cluster, in thousands of small files read from a shared file system), and by the test
suite's ~100 TensorFlow processes. `install()` (called by `import ops`, so before any project module imports
Keras, models.engines.import_keras among them) puts a finder first on sys.meta_path that declines exactly those
imports when a Keras module's body makes them while it is being imported. Keras treats them as not installed
(its sklearn wrappers and image-gallery plots then say so if called, frames are not taken as inputs); an import of
them from anywhere else, including a Keras function at call time, works as usual: a finished cell draws its
learning curves with matplotlib.
"""

from __future__ import annotations

import importlib.abc
import sys

KERAS_OPTIONAL = ("sklearn", "matplotlib", "pandas")  # top-level packages Keras imports if installed


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
    """Declines KERAS_OPTIONAL packages to Keras's module bodies (ModuleNotFoundError, as if not installed)."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002 - the finder protocol's signature
        if fullname in KERAS_OPTIONAL and _importer_is_a_keras_module_body():
            raise ModuleNotFoundError(f"{fullname} is not imported for Keras here (ops/lean_keras.py)", name=fullname)
        return None


def install() -> None:
    """Puts the finder first on sys.meta_path, once a process."""
    if not any(isinstance(finder, _KerasOptionalImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _KerasOptionalImports())
