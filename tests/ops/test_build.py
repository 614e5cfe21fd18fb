"""Build on first use: a cold cache shared by many processes builds once; the build command reports the cache entry;
errors carry the compiler's message.

Only test_concurrent_first_use_builds_once compiles (a cold cache is its subject); the command's report reads the
session's library (the built_library fixture), and the error tests fail before or at the first compiler call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ops
from ops.build import common, tf_library

REPO = Path(__file__).resolve().parents[2]


def run_python(code: str, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_concurrent_first_use_builds_once(tmp_path):
    """Four processes start with an empty cache: exactly one compiles, all load it and compute the same bits."""
    code = """
        import numpy as np, ops
        a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
        print("RESULT", ops.matmul(a, a.T, multiplier="am16").numpy().tobytes().hex())
    """
    procs = [run_python(code, {"AMDNN_OPS_CACHE": str(tmp_path)}) for _ in range(4)]
    outputs = [proc.communicate(timeout=600) for proc in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-3000:]
    assert sum("built the ops" in err for _, err in outputs) == 1
    results = {line for out, _ in outputs for line in out.splitlines() if line.startswith("RESULT")}
    assert len(results) == 1
    libraries = list(tmp_path.glob("*/libamdnn_ops.so"))
    assert len(libraries) == 1
    info = json.loads((libraries[0].parent / "build.json").read_text())
    assert info["target"] == common.cpu_target()[0] and info["tensorflow"].startswith(tf_library.SUPPORTED_TF)


def test_build_command_reports_what_was_built(tmp_path, built_library):
    empty = {**os.environ, "AMDNN_OPS_CACHE": str(tmp_path)}
    missing = subprocess.run([sys.executable, "-m", "ops.build", "--info"], cwd=REPO, env=empty, capture_output=True,
                             text=True)
    assert missing.returncode == 1 and "not built yet" in missing.stdout and str(tmp_path) in missing.stdout
    # The session's cache holds this machine's library (built_library): the command finds and reports it.
    env = dict(os.environ)
    built = subprocess.run([sys.executable, "-m", "ops.build"], cwd=REPO, env=env, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    for key in ("library", "target", "tensorflow", "compiler"):
        assert key in built.stdout
    assert f"library      {built_library.library}" in built.stdout and str(common.cache_root()) in built.stdout
    info = subprocess.run([sys.executable, "-m", "ops.build", "--info"], cwd=REPO, env=env, capture_output=True,
                          text=True)
    assert info.returncode == 0 and info.stdout == built.stdout
    # --report loads the library and asks its kernels: the level they were compiled for and the modes fast there
    # (every mode on x86-64-v3 and v4; none on other CPUs, whose builds have the generic kernel only).
    reported = subprocess.run([sys.executable, "-m", "ops.build", "--report"], cwd=REPO, env=env, capture_output=True,
                              text=True)
    assert reported.returncode == 0, reported.stderr[-3000:]
    lines = {line[:12].strip(): line[12:].strip() for line in reported.stdout.splitlines()}  # "{key:12s} {value}"
    level = common.cpu_target()[0]
    assert level.replace("-vbmi", "") in lines["cpu kernels"] or not level.startswith(("x86-64-v3", "x86-64-v4"))
    everything = " ".join([*ops.names(include_native=False), "lut"])  # the kernels' modes; "lut" runs the table
    if level.startswith(("x86-64-v3", "x86-64-v4")):
        assert lines["fast modes"] == everything and lines["generic only"] == "none", lines
    else:
        assert lines["fast modes"] == "none" and lines["generic only"] == everything, lines


def test_missing_compiler_is_a_clear_error(tmp_path):
    proc = run_python("import ops.build as b; b.build()", {"AMDNN_OPS_CACHE": str(tmp_path), "CXX": "no-such-c++"})
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "no C++ compiler: 'no-such-c++' is not on PATH" in err


def test_failed_build_carries_the_compiler_message(tmp_path):
    # The real compiler, given a flag it does not know: its own diagnostic must reach the user.
    wrapper = tmp_path / "bad-g++"
    wrapper.write_text('#!/bin/sh\nexec g++ -fno-such-option-amdnn "$@"\n')
    wrapper.chmod(0o755)
    proc = run_python("import ops.build as b; b.build()", {"AMDNN_OPS_CACHE": str(tmp_path / "cache"),
                                                           "CXX": str(wrapper)})
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "compiling the AMDNN ops failed" in err and "-fno-such-option-amdnn" in err


def test_wrong_tensorflow_is_a_clear_error(tmp_path):
    code = """
        import tensorflow as tf
        tf.__version__ = "2.19.1"
        import ops.build as b
        b.build()
    """
    _, err = run_python(code, {"AMDNN_OPS_CACHE": str(tmp_path)}).communicate(timeout=120)
    assert "TensorFlow 2.19.1 is installed; the ops are built for TensorFlow 2.21.x" in err


def test_cpu_target_never_exceeds_the_cpu(monkeypatch):
    monkeypatch.setattr(common.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(common, "cpu_flags", lambda: {"avx2", "fma", "f16c", "bmi1", "bmi2", "movbe", "sse4_2",
                                                      "popcnt", "ssse3", "avx512f"})
    assert common.cpu_target() == ("x86-64-v3", ["-march=x86-64-v3"])
    monkeypatch.setattr(common, "cpu_flags", lambda: {"sse4_2", "popcnt", "ssse3"})
    assert common.cpu_target()[0] == "x86-64-v2"
    monkeypatch.setattr(common, "cpu_flags", set)
    assert common.cpu_target()[0] == "x86-64"


def test_cache_key_changes_with_target_and_tensorflow():
    keys = {tf_library._build_key(tf, target, "g++ 12") for tf in ("2.21.0", "2.21.1")
            for target in ("x86-64-v3", "x86-64-v4")}
    assert len(keys) == 4
