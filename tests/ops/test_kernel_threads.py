"""The kernels' bits do not depend on the thread count: the same inputs through conv2d (forward, both gradients) and
matmul, in separate processes whose TensorFlow runs 1, 2 and 4 intra-op threads, give identical bits, on the fast
path and on the generic path (an operand of 1e-37 makes its products underflow), for several modes.

The thread count changes how the GEMM splits C into tasks (at least 3 per thread), so this checks that no split ever
changes an accumulation order. A process, because the intra-op pool is fixed once TensorFlow initialises.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
THREADS = (1, 2, 4)
MODES = ("acc32", "am16", "am32", "fp16")

COMPUTE = r"""
import json, sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))  # before TensorFlow initialises
import ops

rng = np.random.default_rng(7)
x = rng.standard_normal((6, 17, 15, 8)).astype(np.float32)       # NHWC
w = rng.standard_normal((3, 3, 8, 24)).astype(np.float32)        # HWIO
dy = rng.standard_normal((6, 17, 15, 24)).astype(np.float32)     # conv output, SAME
a = rng.standard_normal((301, 157)).astype(np.float32)
b = rng.standard_normal((157, 203)).astype(np.float32)
out, paths = {}, {}
for inputs in ("ordinary", "underflow"):
    xi, ai = x.copy(), a.copy()
    if inputs == "underflow":
        xi[0, 0, 0, 0] = ai[0, 0] = 1e-37
    for mode in sys.argv[3:]:
        before = ops.path_counts()
        xt, wt = tf.constant(xi), tf.constant(w)
        with tf.GradientTape() as tape:
            tape.watch([xt, wt])
            y = ops.conv2d(xt, wt, padding="SAME", multiplier=mode)
        dx, dw = tape.gradient(y, [xt, wt], output_gradients=tf.constant(dy))
        for name, value in (("y", y), ("dx", dx), ("dw", dw), ("matmul", ops.matmul(ai, b, multiplier=mode))):
            out[f"{inputs}/{mode}/{name}"] = np.asarray(value).view(np.uint32)
        after = ops.path_counts()
        paths[f"{inputs}/{mode}"] = {k: after[k] - before[k] for k in after}
np.savez(sys.argv[2], **out)
print("PATHS " + json.dumps(paths))
"""


def _run(threads: int, tmp_path: Path) -> tuple[dict, dict]:
    target = tmp_path / f"threads{threads}.npz"
    proc = subprocess.run([sys.executable, "-c", COMPUTE, str(threads), str(target), *MODES], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("PATHS "))[len("PATHS "):])
    with np.load(target) as f:
        return {k: f[k] for k in f.files}, paths


def test_bits_do_not_depend_on_the_thread_count(tmp_path):
    from ops.build import cpu_target

    runs = {n: _run(n, tmp_path) for n in THREADS}
    reference, _ = runs[THREADS[0]]
    assert len(reference) == 2 * len(MODES) * 4
    for n in THREADS[1:]:
        bits, _ = runs[n]
        assert bits.keys() == reference.keys()
        differing = [k for k in reference if not np.array_equal(bits[k], reference[k])]
        assert not differing, f"{n} threads differ from 1 thread in {differing}"
    # Both paths were exercised: underflowing operands went generic (conv forward, filter gradient and matmul read
    # them; the input gradient does not), ordinary ones fast where the build has fast kernels.
    for n, (_, paths) in runs.items():
        for mode in MODES:
            if mode != "fp16":  # IEEE half arithmetic has no range rules: always fast where compiled
                assert paths[f"underflow/{mode}"]["generic_calls"] >= 3, (n, mode, paths)
            if cpu_target()[0].startswith(("x86-64-v4", "x86-64-v3")):
                assert paths[f"ordinary/{mode}"]["generic_calls"] == 0, (n, mode, paths)
