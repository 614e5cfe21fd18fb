"""Where the test suite's CPU time goes: every Python process it starts, with its CPU seconds, by test.

    python -m bench.suite_cpu [--top N] [pytest arguments]      e.g.  python -m bench.suite_cpu tests/orchestrator

Runs `bash tests/run.sh` (the README's test command: two workers) with a sitecustomize in the venv's site-packages
that appends, when each Python process exits, its CPU seconds (user + system, its own, not its children's), its
arguments, the test that was running (PYTEST_CURRENT_TEST, which subprocesses inherit), whether it loaded
TensorFlow, torch or MLflow, and which of Keras' optional integrations (models.engines.KERAS_OPTIONAL); the file is
removed again however the run ends. The machine's CPU over the run comes from /proc/stat, so the table also says
what no Python process accounts for: compilers (g++, nvcc), Slurm's daemons, chromium, and processes killed by a
signal (a SIGKILL skips the exit hook: the cluster tests' killed jobs).

The suite is CPU-bound on CI's 2 cores (docs/performance.md, "The test suite on 2 cores"): a test's cost to CI is its
CPU seconds, most of them in subprocesses, not the seconds pytest's --durations shows for it.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from models.engines import KERAS_OPTIONAL

REPO = Path(__file__).resolve().parents[1]

HOOK = '''
import atexit, json, os, sys, time
def _amdnn_suite_cpu():
    t = os.times()
    record = {"cpu": round(t.user + t.system, 2), "argv": sys.argv[:4],
              "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "tensorflow": "tensorflow" in sys.modules,
              "torch": "torch" in sys.modules, "mlflow": "mlflow" in sys.modules,
              "keras_optional": [m for m in KERAS_OPTIONAL if m in sys.modules]}
    try:
        fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, (json.dumps(record) + "\\n").encode())  # one write: lines of processes exiting together stay whole
        os.close(fd)
    except OSError:
        pass
atexit.register(_amdnn_suite_cpu)
'''.replace("KERAS_OPTIONAL", repr(KERAS_OPTIONAL))


def _site_packages() -> Path:
    out = subprocess.run([str(REPO / ".venv/bin/python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _unit(test: str) -> str:
    return test.split("::", 1)[0] if test else "(no test: pytest's workers, set-up)"


def report(records: list[dict], machine_cpu: float, wall: float, top: int) -> str:
    python_cpu = sum(r["cpu"] for r in records)
    tf = [r for r in records if r["tensorflow"]]
    lines = [f"wall {wall:.0f} s; machine CPU {machine_cpu:.0f} s; Python processes {len(records)}, "
             f"{python_cpu:.0f} CPU s ({len(tf)} with TensorFlow: {sum(r['cpu'] for r in tf):.0f} s); not in any "
             f"Python process that exited normally: {machine_cpu - python_cpu:.0f} s", ""]
    for title, key in (("by file", lambda r: _unit(r["test"].split(" (")[0])),
                       ("by test", lambda r: r["test"].split(" (")[0] or _unit(""))):
        cpu, count = collections.Counter(), collections.Counter()
        for r in records:
            cpu[key(r)] += r["cpu"]
            count[key(r)] += 1
        lines += [f"| CPU s | processes | {title} |", "| ---: | ---: | --- |"]
        lines += [f"| {seconds:.0f} | {count[name]} | {name} |" for name, seconds in cpu.most_common(top)] + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=25, help="rows of each table (default 25)")
    args, pytest_args = parser.parse_known_args(argv)
    if not (REPO / ".venv/bin/python").exists():
        subprocess.run([sys.executable, "-m", "orchestrator.environment", "--extras", "test"], cwd=REPO, check=True)
    hook = _site_packages() / "sitecustomize.py"
    if hook.exists():
        sys.exit(f"{hook} exists already; this tool would replace it. Move it away first.")
    fd, log = tempfile.mkstemp(prefix="amdnn-suite-cpu-", suffix=".jsonl")
    os.close(fd)
    hook.write_text(HOOK.replace("LOG", repr(log)))
    try:
        busy, started = _busy_seconds(), time.time()
        code = subprocess.run(["bash", "tests/run.sh", *pytest_args], cwd=REPO).returncode
        machine_cpu, wall = _busy_seconds() - busy, time.time() - started
    finally:
        hook.unlink(missing_ok=True)
    records = [json.loads(line) for line in Path(log).read_text().splitlines() if line.strip()]
    print(report(records, machine_cpu, wall, args.top))
    print(f"(each process: {log})")
    return code


if __name__ == "__main__":
    sys.exit(main())
