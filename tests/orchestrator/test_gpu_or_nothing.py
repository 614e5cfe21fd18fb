"""GPU or nothing: a cell that asked for GPUs its engine does not see is refused before it trains, saying why and what
would fix it, and never trains on the CPU instead. Run with the real frameworks on a machine without a GPU."""
from __future__ import annotations

import json
import subprocess

import pytest

from orchestrator.cell.devices import nvidia_driver_present
from orchestrator.environment import engine_extras, launch_extras
from tests.orchestrator.helpers import PYTHON, REPO, TINY, env

no_gpu_here = pytest.mark.skipif(nvidia_driver_present(), reason="this machine has an NVIDIA driver: GPUs may be seen")

# What each engine's refusal says about its build and how to get a GPU one (this machine's torch is 2.13.0+cpu).
BUILD = {"tensorflow": ("TensorFlow 2.21", "built with CUDA 12", "pip install -e .[gpu]"),
         "torch": ("torch 2.13", "a CPU-only build", "pip install -e .[torch]")}


@no_gpu_here
@pytest.mark.parametrize("engine", ["tensorflow", "torch"])
def test_a_cell_asking_for_a_gpu_it_does_not_see_is_refused_and_never_trains(workdir, engine, monkeypatch):
    from orchestrator.cell.run import run_cell
    from orchestrator.common import cellfiles

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # cluster=local with cluster.gpus=1: the real training process (supervised, as in a job), the real framework.
    result = run_cell(workdir.cfg(*TINY, f"engine={engine}", "cluster.gpus=1"))

    assert (result.status, result.attempts) == ("failed", 1)  # refused: not a crash, so not retried
    error = result.error
    assert error.startswith(f"GpusMissing: cluster.gpus=1 asks for 1 GPU, but engine={engine} sees none on ")
    assert "the cell does not train on the CPU in their place" in error
    name, build, install = BUILD[engine]
    assert name in error and build in error
    assert "NVIDIA driver: none on this machine (/proc/driver/nvidia/version absent)" in error
    assert "CUDA_VISIBLE_DEVICES: unset" in error
    assert "Fix: run the cell on a GPU node (Slurm: a GPU partition" in error
    assert install in error and error.endswith("or set cluster.gpus=0 to train on the CPU.")

    cell_dir = workdir.path / "ck" / result.name
    assert not list((cell_dir / "checkpoints").glob("step-*")), "a refused cell wrote a checkpoint"
    assert not (cell_dir / cellfiles.DONE).exists()
    events = [e["event"] for e in cellfiles.events(cell_dir)]
    assert events == ["start", "failed"]


START = """
import json, sys
from orchestrator.cell import devices
try:
    print(json.dumps({"gpus": devices.start_engine(sys.argv[1], json.loads(sys.argv[2]))}))
except devices.GpusMissing as e:
    print(json.dumps({"refused": str(e)}))
"""


def start_engine(engine: str, gpus: int | None, **environ: str) -> tuple[dict, str]:
    """devices.start_engine in a fresh process (the framework and CUDA_VISIBLE_DEVICES are per process)."""
    e = env()
    e.pop("CUDA_VISIBLE_DEVICES", None)
    e.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the probe lines are dropped without it
    e.update(environ)
    done = subprocess.run([PYTHON, "-c", START, engine, json.dumps(gpus)], env=e, cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@no_gpu_here
def test_a_scheduler_cell_wanting_two_gpus_names_cuda_visible_devices_and_what_tensorflow_said():
    answer, stderr = start_engine("tensorflow", 2, CUDA_VISIBLE_DEVICES="")  # as cluster=slurm cluster.gpus=2
    error = answer["refused"]
    assert error.startswith("cluster.gpus=2 asks for 2 GPUs, but engine=tensorflow sees none")
    assert "CUDA_VISIBLE_DEVICES: ''" in error
    assert "unset CUDA_VISIBLE_DEVICES, or list as many as cluster.gpus" in error
    assert "TensorFlow said: Could not find cuda drivers on your machine" in error
    assert "cudart_stub" not in stderr  # the probe's lines are in the reason, not in the log


@no_gpu_here
@pytest.mark.parametrize("engine", ["tensorflow", "torch"])
def test_no_gpu_asked_for_starts_on_the_cpu(engine):
    for gpus in (None, 0):  # cluster=local unset; a scheduler preset's 0
        answer, stderr = start_engine(engine, gpus)
        assert answer == {"gpus": 0}
        assert "cuInit" not in stderr and "Could not find cuda drivers" not in stderr


def test_the_extras_follow_the_engine_and_the_gpu():
    assert engine_extras(("tensorflow",), gpu=True) == ("gpu",)
    assert engine_extras(("tensorflow",), gpu=False) == ()
    assert engine_extras(("torch",), gpu=False) == ("torch",)
    assert engine_extras(("tensorflow", "torch"), gpu=True) == ("gpu", "torch")
    # launch.py here: torch is importable (the test extra), so engine=torch installs nothing more
    assert launch_extras(["-m", "engine=tensorflow,torch", "model=lenet5"]) == (
        () if not nvidia_driver_present() else launch_extras([]))
