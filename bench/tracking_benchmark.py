"""The targets of docs/tracking.md: importing 10^5 queued records into an SQLite store, and `status` and `report` over
a 1000-cell grid with records pending, each as a user runs it (a fresh process, imports included).

    python -m bench.tracking_benchmark                      # 1000 cells x 100 epochs, in a new folder in /tmp
    python -m bench.tracking_benchmark --cells 100 --epochs 1000 --out DIR

The cells' queues are written as a job of single-writer mode writes them (a start record with the params and tags
of a real cell, one record of 8 metrics per epoch, the final accuracy, the end), all at once rather than fsynced
line by line, which is the job's cost and not the importer's. Measured, each in its own process:
  first import    every record of every cell, the runs created (MLflow's API: a few calls per cell)
  epochs import   as many epoch records again, into the existing runs (a running grid's steady state)
  status          `python -m orchestrator.cluster.status` over the grid, one new epoch per cell pending (best of
                  --repeat runs, each with a new epoch pending)
  report          `python -m orchestrator.report`, likewise
Prints a markdown table with the machine and the date.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from orchestrator.config.identity import base_tags, cell_identity
from orchestrator.config.validate import validate
from orchestrator.tracking.queue import register
from orchestrator.tracking.tracker import flatten

REPO = Path(__file__).resolve().parents[1]
EPOCH_METRICS = ("loss", "accuracy", "test_loss", "test_accuracy", "lr", "epoch_time_s", "images_per_s")
TARGETS_S = {"epochs import": 10.0, "status": 5.0, "report": 5.0}   # the targets (docs/tracking.md)


def _cell_params(index: int) -> tuple[dict, dict]:
    """A real cell's params and tags (LeNet-300-100 under am16, seed `index`), composed from conf/."""
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        c = validate(compose(config_name="config", overrides=[f"seed={index}"]))
    c.pop("hydra", None)
    return flatten(c), base_tags(cell_identity(c), c)


def _epoch_lines(first: int, count: int, time_ms: int) -> list[str]:
    return [json.dumps({"op": "metrics", "check": "epoch", "step": 100 * e, "time_ms": time_ms + e,
                        "metrics": {"epoch": float(e), **{k: 1.0 / e for k in EPOCH_METRICS}}}, sort_keys=True)
            for e in range(first, first + count)]


def write_grid(root: Path, cells: int, epochs: int) -> tuple[str, list[Path]]:
    """The store's register, every cell's queue and done.json, and the grid record (state/) of `cells` cells."""
    uri = f"sqlite:///{root / 'mlflow.db'}"
    params, tags = _cell_params(0)
    now = int(time.time() * 1000)
    folders = []
    for i in range(cells):
        identity = f"{i:064x}"
        folder = root / "ck" / f"cell-{i:04d}"
        folder.mkdir(parents=True)
        lines = [json.dumps({"op": "start", "params": {**params, "seed": str(i)}, "time_ms": now,
                             "tags": {**tags, "amdnn.cell": identity, "amdnn.seed": str(i)}}, sort_keys=True),
                 *_epoch_lines(1, epochs, now),
                 json.dumps({"op": "metrics", "check": "final_test_accuracy", "step": 100 * epochs, "time_ms": now,
                             "metrics": {"final_test_accuracy": 0.9}}),
                 json.dumps({"op": "end", "status": "FINISHED", "time_ms": now})]
        (folder / "tracking-queue.jsonl").write_text("\n".join(lines) + "\n")
        (folder / "done.json").write_text(json.dumps({"identity": identity, "test_accuracy": 0.9, "epochs": epochs}))
        register(root / "mlflow.db", identity, folder, "amdnn", folder.name)
        record = {"name": folder.name, "identity": identity, "cell_dir": str(folder), "tracking_uri": uri,
                  "tracking_mode": "single_writer", "experiment": "amdnn", "model": "lenet300", "mult": "am16",
                  "dataset": "digits", "seed": i, "epochs": epochs, "archive_dir": None, "max_attempts": 3,
                  "attempts": 1, "executor": {"scheduler": "slurm"}, "jobs": [{"id": str(1000 + i), "how": "launch"}]}
        (root / "state" / "cells").mkdir(parents=True, exist_ok=True)
        (root / "state" / "cells" / f"{folder.name}.json").write_text(json.dumps(record))
        folders.append(folder)
    return uri, folders


def append_epochs(folders: list[Path], first: int, count: int) -> int:
    now = int(time.time() * 1000)
    for folder in folders:
        with open(folder / "tracking-queue.jsonl", "a") as f:
            f.write("\n".join(_epoch_lines(first, count, now)) + "\n")
    return len(folders) * count


def timed(command: list[str]) -> tuple[tuple[float, float], str]:
    """(wall seconds, CPU seconds of the process) and its output. The CPU time is what the wall time would be on an
    idle machine, less the waits for the disk: the one to compare where other work shares the cores."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return (seconds, cpu), proc.stdout + proc.stderr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="status and report: the best of this many runs")
    parser.add_argument("--out", type=Path, default=None, help="a new, empty folder (default: one in /tmp)")
    args = parser.parse_args(argv)
    root = args.out or Path(tempfile.mkdtemp(prefix="amdnn-tracking-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    uri, folders = write_grid(root, args.cells, args.epochs)
    importer = [sys.executable, "-m", "orchestrator.tracking.importer", "--tracking-uri", uri]
    results = []
    records = args.cells * (args.epochs + 3)
    seconds, out = timed(importer)
    results.append(("first import", f"{records} records, {args.cells} runs created", seconds, out))
    records = append_epochs(folders, args.epochs + 1, args.epochs)
    seconds, out = timed(importer)
    results.append(("epochs import", f"{records} epoch records into existing runs", seconds, out))
    epoch = 2 * args.epochs
    for what, command, expected in (
            ("status", [sys.executable, "-m", "orchestrator.cluster.status", "--state-dir", str(root / "state")],
             f"{args.cells} cells: 0 queued, 0 running, {args.cells} finished"),
            ("report", [sys.executable, "-m", "orchestrator.report", "--tracking-uri", uri], "0.9000")):
        times = []
        for _ in range(args.repeat):  # best of N: the machine may be busy with other work
            epoch += 1
            pending = append_epochs(folders, epoch, 1)
            seconds, out = timed(command)
            assert expected in out, out[-2000:]
            times.append(seconds)
        results.append((what, f"{args.cells} cells, {pending} records pending (best of {args.repeat})", min(times),
                        out))

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    load = os.getloadavg()[1]
    print(f"\n{cpu}, {os.cpu_count()} CPUs, load average {load:.1f} (5 min), {time.strftime('%Y-%m-%d')}, store in "
          f"{root}\n")
    print("| what | size | wall s | CPU s | target s |\n|---|---|---|---|---|")
    for what, size, (seconds, cpu_s), _ in results:
        target = TARGETS_S.get(what)
        print(f"| {what} | {size} | {seconds:.1f} | {cpu_s:.1f} | {f'<= {target:.0f}' if target else '-'} |")
    for what, _, _, out in results:
        imported = [line for line in out.splitlines() if line.startswith("tracking:")]
        print(f"{what}: {imported[-1] if imported else '(no import line)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
