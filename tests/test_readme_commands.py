"""Every command the README gives, run as written from the root of a fresh copy of the repository after the quick
start (its .venv in place), as a new user would: exit status 0, no file left in the repository's root outside the
run state git ignores, nothing new that git would see, and no TensorFlow CUDA probe noise on a machine without a GPU.

The README's local sweep runs for one epoch; commands that train for minutes, need a GPU, a cluster or nvcc run with
--help (what is checked then is that the command exists and its environment loads); those that cannot run here at all
are named with the reason. A command added to the README fails the classification test until it is placed in one.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]

# Run exactly as written (seconds each on a CPU).
AS_WRITTEN = {
    ".venv/bin/python -m orchestrator.cluster.status",
    ".venv/bin/python -m orchestrator.cluster.resume --dry-run",
    ".venv/bin/python -m orchestrator.report",
    ".venv/bin/python -m ops.describe am16",
    ".venv/bin/python -m models.profile --model lenet5 --mult am16",
    ".venv/bin/python -m models.layer_list lenet5 --mult am16 --keep first_last",
}
# Run as written with these overrides added, which shorten the training. The 2x2 sweep: 1 epoch, and its model list
# overridden by a later model=lenet300 (Hydra's sweeper keeps a key's last value), so that it runs as a 1x2 sweep of
# the same command; the 2x2 grid and its table are tests/orchestrator/test_launch.py's
# (test_sweep_prints_table_and_rerun_trains_nothing), whose two LeNet-5 cells were 40 % of this sweep's time.
SHORTENED = {
    "python3 launch.py -m model=lenet300,lenet5 mult=native,am16": "train.epochs=1 model=lenet300",
    "python3 launch.py -m mult=int8 mult.table=null,ops/luts/evoapprox/mul8s_1L1G.int8s.npy": "train.epochs=1",
}
# Run with --help: they train for minutes, or need a GPU, nvcc, a cluster, a finished study or the user's C file; or
# they are a synopsis ([--out DIR]).
# (Hydra's --help cannot take a sweep's comma lists: those commands are shortened or not run here.)
WITH_HELP = {
    "python3 launch.py",
    ".venv/bin/mlflow ui --backend-store-uri sqlite:///$PWD/mlflow.db",
    ".venv/bin/python -m orchestrator.report [--out DIR]",
    ".venv/bin/python -m ops.selftest",
    ".venv/bin/python -m ops.build --cuda --cuda-arch sm_80,sm_90",
    ".venv/bin/python -m ops.build --torch",
    ".venv/bin/python -m orchestrator.explore sensitivity model=lenet5 dataset=mnist mult=am16",
    ".venv/bin/python -m orchestrator.explore search model=lenet5 dataset=mnist mult=am16 --steps 3",
    ".venv/bin/python -m ops.tables from-c mul8u_2AC.c --bf16 --out tables",
}
# Not run here, and why.
NOT_HERE = {
    "bash tests/run.sh": "the whole suite: this test is part of it",
    "python3 launch.py -m model=resnet18,resnet34,resnet50 mult=am32,am16 dataset=cifar10 cluster=gadi":
        "submits to Gadi's PBS",
    "python3 launch.py -m model=resnet18,resnet34,resnet50 mult=native,am16 dataset=cifar10 train=cifar":
        "trains six ResNets on CIFAR-10: hours without GPUs",
    "python3 launch.py -m ... cluster.gpus=2 cluster.gpu_ids=[4,5,6,7]": "elides its overrides (...)",
    "bash tests/device/run_on_gpu.sh": "needs a CUDA GPU and nvcc",
    "AMDNN_DEVICE_MODES=am16,lut bash tests/device/run_on_gpu.sh": "needs a CUDA GPU and nvcc",
    ".venv/bin/python bench/gpu_benchmark.py": "needs a CUDA GPU",
    ".venv/bin/python bench/gpu_epoch.py": "needs a CUDA GPU",
    "nvcc -arch=sm_90 -O3 -o /tmp/loops bench/gpu_inner_loops.cu && /tmp/loops": "needs nvcc and a CUDA GPU",
}
COMMAND_START = re.compile(r"^    (python3 |\.venv/bin/|bash |nvcc |AMDNN_\w+=\S+ bash )")
CUDA_NOISE = re.compile(r"cuInit|cuda drivers", re.IGNORECASE)
# The run state a command may leave in the root: the MLflow store and the files beside it, the reports, the grid
# records, the checkpoints, a local sweep's Hydra folder, MLflow's artifacts; each ignored by git (checked below).
ROOT_STATE = re.compile(r"^(mlflow\.db.*|\.mlflow\.db\..*|mlruns|reports|\.amdnn|\.venv\.lock|checkpoints|data|"
                        r"multirun)$")


def readme_commands() -> list[str]:
    """The commands of the README's indented blocks, without their comments."""
    commands = []
    for line in (REPO / "README.md").read_text().splitlines():
        if COMMAND_START.match(line):
            commands.append(re.split(r"\s{2,}#", line.strip())[0].strip())
    return commands


def test_every_readme_command_is_classified():
    found = set(readme_commands())
    known = AS_WRITTEN | set(SHORTENED) | WITH_HELP | set(NOT_HERE)
    assert found == known, f"unclassified: {sorted(found - known)}; gone from the README: {sorted(known - found)}"


@pytest.fixture(scope="module")
def fresh_copy(tmp_path_factory) -> Path:
    """The repository's files as a clone has them (tracked, and new ones not ignored), in a git repository of their
    own, with the .venv of the quick start linked in."""
    copy = tmp_path_factory.mktemp("clone") / "amdnn"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file() and not source.is_symlink():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    (copy / ".venv").symlink_to((REPO / ".venv").resolve())
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(command, cwd=copy, check=True, capture_output=True)
    return copy


def _user_environment() -> dict:
    """The environment of a new user's shell: none of the test run's own settings."""
    drop = ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "MLFLOW_TRACKING_URI", "CUDA_VISIBLE_DEVICES", "AMDNN_FAKE_GPU_IDS")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.mark.parametrize("command", sorted(AS_WRITTEN) + sorted(f"{c} {extra}" for c, extra in SHORTENED.items()) +
                         sorted(c + " --help" for c in WITH_HELP))
def test_readme_command_runs_as_written(fresh_copy, command):
    """`command` (a README command, as written, shortened or with --help) run from the root of a fresh copy with a
    new user's environment: exit status 0, no CUDA probe noise, nothing left in the root but ignored run state, and
    nothing git would see."""
    if "[--out DIR]" in command:
        command = command.replace(" [--out DIR]", "")
    before = set(os.listdir(fresh_copy))
    result = subprocess.run(["bash", "-c", command], cwd=fresh_copy, env=_user_environment(), capture_output=True,
                            text=True, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, f"{command}: exit status {result.returncode}\n{out[-4000:]}"
    assert not CUDA_NOISE.search(out), f"{command}: CUDA probe noise\n{out[-4000:]}"
    new = sorted(n for n in set(os.listdir(fresh_copy)) - before if not ROOT_STATE.match(n))
    assert not new, f"{command} left {new} in the repository's root"
    seen = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=fresh_copy,
                          capture_output=True, text=True, check=True).stdout
    assert not [l for l in seen.splitlines() if l.startswith("??")], f"{command}: files git does not ignore:\n{seen}"


def test_the_stores_state_files_are_ignored_by_git(tmp_path):
    """What the tracking code creates beside the SQLite store (tracking/writer, tracking/queue), and SQLite's own
    journals, wherever the store lies in the repository."""
    from orchestrator.tracking.queue import register_dir, writer_lock_path

    for db in (Path("mlflow.db"), Path("stores/grid.db")):
        names = [str(writer_lock_path(db)), str(register_dir(db) / "cell.json"), f"{db}.lock", f"{db}.ready",
                 str(db.with_name(f".{db.name}.creating-123")), f"{db}-journal", f"{db}-wal"]
        checked = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True,
                                 text=True)
        ignored = checked.stdout.split()
        assert sorted(ignored) == sorted(names), f"not ignored: {set(names) - set(ignored)}"
