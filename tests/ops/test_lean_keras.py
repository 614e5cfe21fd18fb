"""ops/lean_keras.py: after `import ops`, importing TensorFlow and Keras loads none of scikit-learn, matplotlib and
pandas (Keras would, all three being installed with MLflow), and they still import for any other code afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("sklearn", "matplotlib", "pandas")  # ops.lean_keras.KERAS_OPTIONAL, written out: the test says it


def loaded_after(code: str) -> dict:
    """Runs code in a fresh TensorFlow-backed Python; returns the JSON it prints last."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_keras_imports_them_without_the_finder():
    """The premise: without `import ops`, Keras's import loads all three (else the finder guards nothing)."""
    seen = loaded_after(f"""
        import json, sys
        import tensorflow, keras
        print(json.dumps({{name: name in sys.modules for name in {PACKAGES!r}}}))
    """)
    assert seen == {name: True for name in PACKAGES}


def test_after_import_ops_keras_loads_neither_and_others_still_can():
    seen = loaded_after(f"""
        import json, sys
        import ops, tensorflow, keras
        from keras import layers
        before = {{name: name in sys.modules for name in {PACKAGES!r}}}
        import matplotlib.pyplot, sklearn.linear_model, pandas
        after = {{name: name in sys.modules for name in {PACKAGES!r}}}
        dense = list(layers.Dense(3)(keras.ops.ones((2, 4))).shape)
        print(json.dumps({{"before": before, "after": after, "dense": dense}}))
    """)
    assert seen["before"] == {name: False for name in PACKAGES}
    assert seen["after"] == {name: True for name in PACKAGES}
    assert seen["dense"] == [2, 3]


def test_install_twice_puts_one_finder():
    seen = loaded_after("""
        import json, sys
        import ops
        from ops import lean_keras
        lean_keras.install()
        lean_keras.install()
        print(json.dumps(sum(type(f).__name__ == "_KerasOptionalImports" for f in sys.meta_path)))
    """)
    assert seen == 1
