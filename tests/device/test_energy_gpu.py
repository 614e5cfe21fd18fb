"""NVML energy on a GPU (the part of orchestrator.cell.energy that the CPU suite cannot run): the counter of the visible
GPUs grows while a GPU works, at a plausible power, and the meter logs it per epoch and per run.

    AMDNN_DEVICE_TESTS=1 python -m pytest tests/device/test_energy_gpu.py -q     (or bash tests/device/run_on_gpu.sh)
"""
from __future__ import annotations

import time

import pytest
import torch

from orchestrator.cell import energy

if not torch.cuda.is_available():
    pytest.fail("tests/device needs a CUDA GPU (run them on the GPU machine with tests/device/run_on_gpu.sh)",
                pytrace=False)


def _work(seconds: float) -> float:
    """Keep the GPU busy with fp32 matmuls for about `seconds`; return the time it took."""
    a = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(20):
            a = torch.tanh(a @ a)
        torch.cuda.synchronize()
    return time.monotonic() - t0


def test_nvml_counter_grows_at_a_plausible_power(tmp_path):
    gpu = energy.NvmlEnergy()
    assert gpu.describe().startswith("NVML: ")
    before = gpu.joules()
    seconds = _work(5.0)
    joules = gpu.joules() - before
    watts = joules / seconds
    print(f"{gpu.describe()}: {joules:.1f} J in {seconds:.1f} s = {watts:.0f} W")
    assert 20.0 < watts < 1500.0  # an H100/H200 under matmul load draws some hundreds of watts


def test_meter_logs_gpu_energy_per_epoch_and_run(tmp_path):
    meter = energy.EnergyMeter(tmp_path, uses_gpu=True)
    assert meter.tags()["amdnn.energy_gpu"].startswith("NVML: ")
    _work(2.0)
    first = meter.epoch()
    _work(2.0)
    second = meter.epoch()
    assert first["energy_gpu_j"] > 0 and second["energy_gpu_j"] > 0
    assert second["energy_gpu_run_j"] == pytest.approx(first["energy_gpu_j"] + second["energy_gpu_j"])
    meter.close()


def test_hidden_gpus_are_not_counted():
    with pytest.raises(energy.Missing, match="no GPU visible"):
        energy.NvmlEnergy(visible="")


def test_the_run_records_the_driver_and_its_cuda_version():
    """orchestrator.cell.run_facts.nvml_facts on a real driver: the version nvidia-smi prints, and a CUDA version that
    can run the kernels built here (nvcc 13 needs a driver that supports CUDA >= 13.0)."""
    import subprocess

    from orchestrator.cell.run_facts import nvml_facts

    facts = nvml_facts()
    smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout.split()[0]
    print(facts)
    assert facts["amdnn.gpu_driver"] == smi
    major, minor = (int(part) for part in facts["amdnn.gpu_driver_cuda"].split("."))
    assert (major, minor) >= (12, 0)
