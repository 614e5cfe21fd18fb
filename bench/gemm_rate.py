"""Single-thread GEMM rates of the CPU kernels per x86-64 level and mode, without TensorFlow (bench/gemm_rate.cc).

The per-op benchmark (bench/ops_benchmark.py) times whole TensorFlow ops against oneDNN on a shared machine, where
single shapes swing by 2x; this times the GEMM alone on one thread, best of several repeats, which is steady enough
to compare two versions of a kernel. Each level is compiled with the flags ops/build/common.py gives it; every result is
first checked bit for bit against the scalar definitions (multiplier.h) before it is timed.

    python -m bench.gemm_rate [--levels x86-64-v4-vbmi,x86-64-v4,x86-64-v3] [--modes acc32,am16,lut]
                              [--size 256] [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

import ops
from ops.build.common import SOURCE_DIR, X86_TARGETS, cpu_flags, cxx_flags

HERE = Path(__file__).resolve().parent
MODES = (*ops.names(include_native=False), "lut")  # the registry's modes; "lut" times the table kernel
LUT = HERE.parent / "tests" / "data" / "approxtrain-luts" / "ACC_7.bin"  # the table ops_benchmark times lut with


def build(level: str, out_dir: Path) -> Path:
    target = next((t for t in X86_TARGETS if t[0] == level), None)
    if target is None:
        raise SystemExit(f"unknown level {level!r}; valid: {', '.join(t[0] for t in X86_TARGETS)}")
    missing = target[1] - cpu_flags()
    if missing:
        raise SystemExit(f"{level} needs CPU features this CPU lacks: {', '.join(sorted(missing))}")
    flags = cxx_flags() + target[2]
    binary = out_dir / f"gemm_rate-{level}"
    cxx = os.environ.get("CXX", "g++")
    subprocess.run([cxx, "-std=c++17", *flags, str(HERE / "gemm_rate.cc"), str(SOURCE_DIR / "gemm_cpu.cc"),
                    str(SOURCE_DIR / "multiplier_setup.cc"), "-o", str(binary), "-lpthread"], check=True)
    return binary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--levels", default="x86-64-v4-vbmi,x86-64-v4,x86-64-v3")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--size", type=int, default=256, help="M = N = K")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for level in args.levels.split(","):
            binary = build(level, Path(tmp))
            for mode in args.modes.split(","):
                extra = [str(LUT)] if mode == "lut" else []
                size = str(args.size)
                subprocess.run([str(binary), "table" if mode == "lut" else mode, size, size, size,
                                str(args.repeats), *extra], check=True)


if __name__ == "__main__":
    main()
