"""Energy counters: NVML and RAPL as this machine has them (no GPU, no RAPL exposed: both reported missing with the
reason, never as 0), and RAPL's arithmetic (wrap-around, several packages, running totals across attempts) on a
folder laid out like /sys/class/powercap, since this machine exposes none: a stand-in for the kernel's files, the one
fake here. NVML's counting itself is checked on the GPU machine: tests/device/test_energy_gpu.py."""
from __future__ import annotations

import json

import pytest

from orchestrator.cell import energy


def _package(root, index: int, uj: int, max_uj: int = 2**32 - 1, name: str | None = None):
    zone = root / f"intel-rapl:{index}"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "name").write_text(f"{name or f'package-{index}'}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (zone / "energy_uj").write_text(f"{uj}\n")
    return zone


def test_nvml_without_a_gpu_is_missing_with_the_reason():
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py is a dependency: pip install -e .")
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML works here: this machine has a GPU (tests/device/test_energy_gpu.py measures it)")
    except pynvml.NVMLError:
        pass
    with pytest.raises(energy.Missing, match=r"^missing: NVML cannot be used here \(.+\)"):
        energy.NvmlEnergy()


def test_meter_reports_missing_counters_as_tags_and_logs_no_zeros(tmp_path):
    meter = energy.EnergyMeter(tmp_path, uses_gpu=True, cpu=lambda: energy.RaplEnergy(tmp_path / "no-powercap"))
    tags = meter.tags()
    assert tags["amdnn.energy_cpu"].startswith("missing: no RAPL package zone in")
    assert tags["amdnn.energy_gpu"].startswith("missing: ")  # no NVML on this machine (or no GPU visible)
    assert meter.epoch() == {} and not (tmp_path / energy.TOTALS).exists()
    assert energy.EnergyMeter(tmp_path, uses_gpu=False).tags()["amdnn.energy_gpu"] == \
        "not measured: the cell trains on no GPU"


def test_rapl_sums_packages_and_counts_through_a_wrap(tmp_path):
    root = tmp_path / "powercap"
    p0 = _package(root, 0, uj=1_000_000, max_uj=9_999_999)
    p1 = _package(root, 1, uj=5_000_000)
    _package(root, 2, uj=7, name="psys")              # not a package: left out
    (root / "intel-rapl:0:0").mkdir()                  # a sub-zone (core): left out
    rapl = energy.RaplEnergy(root)
    assert rapl.describe() == "RAPL: package-0, package-1"
    (p0 / "energy_uj").write_text("9000000\n")        # +8 J
    (p1 / "energy_uj").write_text("5500000\n")        # +0.5 J
    assert rapl.joules() == pytest.approx(8.5)
    (p0 / "energy_uj").write_text("500000\n")         # wrapped at 9999999: +1 J + 0.5 J
    assert rapl.joules() == pytest.approx(10.0)


def test_run_totals_continue_across_attempts(tmp_path):
    root = tmp_path / "powercap"
    p0 = _package(root, 0, uj=0)
    cell = tmp_path / "cell"
    cell.mkdir()
    meter = energy.EnergyMeter(cell, uses_gpu=False, cpu=lambda: energy.RaplEnergy(root))
    assert meter.tags() == {"amdnn.energy_gpu": "not measured: the cell trains on no GPU",
                            "amdnn.energy_cpu": "RAPL: package-0"}
    (p0 / "energy_uj").write_text("3000000\n")
    assert meter.epoch() == {"energy_cpu_j": pytest.approx(3.0), "energy_cpu_run_j": pytest.approx(3.0)}
    meter.close()
    again = energy.EnergyMeter(cell, uses_gpu=False, cpu=lambda: energy.RaplEnergy(root))  # a resumed attempt
    (p0 / "energy_uj").write_text("5000000\n")
    assert again.epoch() == {"energy_cpu_j": pytest.approx(2.0), "energy_cpu_run_j": pytest.approx(5.0)}
    assert json.loads((cell / energy.TOTALS).read_text()) == {"cpu": pytest.approx(5.0)}


def test_rapl_readable_by_root_only_is_missing_with_the_reason(tmp_path):
    if __import__("os").geteuid() == 0:
        zone = _package(tmp_path, 0, uj=1)
        (zone / "energy_uj").unlink()
        (zone / "energy_uj").mkdir()  # root reads any file: an unreadable counter is a folder here
        with pytest.raises(energy.Missing, match="unreadable"):
            energy.RaplEnergy(tmp_path)
    else:
        zone = _package(tmp_path, 0, uj=1)
        (zone / "energy_uj").chmod(0)
        with pytest.raises(energy.Missing, match="readable by root only"):
            energy.RaplEnergy(tmp_path)


def test_this_machines_rapl_is_read_or_missing_with_the_reason():
    try:
        rapl = energy.RaplEnergy()
    except energy.Missing as e:
        assert str(e).startswith("missing: ") and len(str(e)) > 20
        return
    assert rapl.joules() >= 0.0 and rapl.describe().startswith("RAPL: package")
