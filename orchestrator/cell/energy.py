"""Energy a cell's training uses, from the hardware's own counters, per epoch and per run, in joules.

    GPU  NVML's total energy counter of each GPU the process may use (nvmlDeviceGetTotalEnergyConsumption, mJ since
         the driver loaded; Volta and newer), through nvidia-ml-py (the `pynvml` module)
    CPU  RAPL package counters of the Linux powercap interface (/sys/class/powercap/intel-rapl:N/energy_uj, µJ,
         wrapping at max_energy_range_uj; also AMD's since Linux 5.8), summed over the packages

Each epoch logs energy_gpu_j / energy_cpu_j (that epoch, this process) and energy_gpu_run_j / energy_cpu_run_j (the
run so far, every attempt included: a running total kept in the cell's folder, energy.json). A counter that cannot be
read is never logged as 0: the metric is absent and the run's tag amdnn.energy_gpu / amdnn.energy_cpu says why (no GPU
used; NVML missing; the GPU has no energy counter; no RAPL zone; energy_uj readable by root only, as on Linux >= 5.10).
Energy spent after the last epoch end of an attempt that crashed is not counted (no counter reading survives it).
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any, Callable

from ops.atomic import write_bytes

POWERCAP = Path("/sys/class/powercap")
TOTALS = "energy.json"   # in the cell's folder: {"gpu": joules, "cpu": joules} over every attempt
POLL_S = 5.0             # RAPL is read this often, well within its fastest wrap (~21 s at 200 W)


class Missing(Exception):
    """A counter that cannot be read here; the message says why."""


class NvmlEnergy:
    """The summed NVML energy counters of the GPUs this process may use. `nvml`: the pynvml module (imported when
    None); raises Missing from the constructor when NVML or the counter is not there."""

    name = "gpu"

    def __init__(self, nvml: Any = None, visible: str | None = None) -> None:
        if nvml is None:
            try:
                import pynvml as nvml  # nvidia-ml-py; only where a GPU is measured (optional: Missing says so)
            except ImportError as e:
                raise Missing(f"missing: the pynvml module is not installed (pip install nvidia-ml-py): {e}") from None
        self.nvml = nvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except nvml.NVMLError as e:
            raise Missing(f"missing: NVML cannot be used here ({e})") from None
        self.handles = _visible(handles, nvml, os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible)
        if not self.handles:
            raise Missing(f"missing: no GPU visible to this process (NVML sees {count}, CUDA_VISIBLE_DEVICES="
                          f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        self.joules()  # a GPU without the counter (before Volta) fails here, not at the first epoch

    def joules(self) -> float:
        try:
            return sum(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles) / 1000.0
        except self.nvml.NVMLError as e:
            raise Missing(f"missing: NVML has no energy counter for this GPU ({e}; Volta or newer needed)") from None

    def describe(self) -> str:
        names = [self.nvml.nvmlDeviceGetName(h) for h in self.handles]
        return "NVML: " + ", ".join(n.decode() if isinstance(n, bytes) else str(n) for n in names)


def _visible(handles: list, nvml: Any, visible: str | None) -> list:
    """The handles CUDA_VISIBLE_DEVICES names (indices or UUIDs), all when it is unset; none when it is empty."""
    if visible is None:
        return handles
    chosen = []
    for item in (v.strip() for v in visible.split(",") if v.strip()):
        if item.isdigit() and int(item) < len(handles):
            chosen.append(handles[int(item)])
        elif not item.isdigit():
            for h in handles:
                uuid = nvml.nvmlDeviceGetUUID(h)
                if (uuid.decode() if isinstance(uuid, bytes) else str(uuid)).startswith(item):
                    chosen.append(h)
    return chosen


class RaplEnergy:
    """The summed RAPL package counters under `root` (the powercap folder); raises Missing from the constructor when
    there is none or it cannot be read."""

    name = "cpu"

    def __init__(self, root: Path = POWERCAP) -> None:
        root = Path(root)
        zones = sorted(z for z in root.glob("intel-rapl:*") if z.name.count(":") == 1) if root.is_dir() else []
        self.zones = [z for z in zones if _text(z / "name", "").startswith("package")]
        if not self.zones:
            raise Missing(f"missing: no RAPL package zone in {root} (this kernel, CPU or virtual machine does not "
                          "expose one)")
        try:
            self.ranges = [int(_text(z / "max_energy_range_uj")) for z in self.zones]
            self.last = [int(_text(z / "energy_uj")) for z in self.zones]
        except PermissionError:
            raise Missing(f"missing: {self.zones[0] / 'energy_uj'} is readable by root only (Linux >= 5.10); "
                          "a site can grant read access with a udev rule") from None
        except (OSError, ValueError) as e:
            raise Missing(f"missing: RAPL counters under {root} unreadable ({e})") from None
        self.total_uj = 0

    def joules(self) -> float:
        """Energy since the constructor, each counter's wrap-around accounted for. A counter wraps at its range
        (typically 2^32 µJ, 4295 J: every 21 s at 200 W), so it must be read more often than that: EnergyMeter
        reads it every POLL_S seconds."""
        for i, zone in enumerate(self.zones):
            now = int(_text(zone / "energy_uj"))
            self.total_uj += (now - self.last[i]) % (self.ranges[i] + 1)
            self.last[i] = now
        return self.total_uj / 1e6

    def describe(self) -> str:
        return "RAPL: " + ", ".join(_text(z / "name", z.name) for z in self.zones)


def _text(path: Path, default: str | None = None) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        if default is None:
            raise
        return default


class EnergyMeter:
    """The counters of one training process and the cell's running totals.

    meter = EnergyMeter(cell_dir, uses_gpu)     # tags(): what is measured, or why not
    meter.epoch() -> {"energy_cpu_j": .., "energy_cpu_run_j": ..}   at each epoch end (only the counters read)
    """

    def __init__(self, cell_dir: Path, uses_gpu: bool,
                 gpu: Callable[[], Any] = NvmlEnergy, cpu: Callable[[], Any] = RaplEnergy) -> None:
        self.totals_path = Path(cell_dir) / TOTALS
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.counters: dict[str, Any] = {}
        self.status: dict[str, str] = {}
        for name, make, wanted in (("gpu", gpu, uses_gpu), ("cpu", cpu, True)):
            if not wanted:
                self.status[name] = "not measured: the cell trains on no GPU"
                continue
            try:
                counter = make()
                self.counters[name] = (counter, counter.joules())
                self.status[name] = counter.describe()
            except Missing as e:
                self.status[name] = str(e)
        if "cpu" in self.counters:
            threading.Thread(target=self._poll, name="amdnn-energy", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    def tags(self) -> dict[str, str]:
        return {f"amdnn.energy_{name}": text[:4000] for name, text in self.status.items()}

    def _poll(self) -> None:
        """Read the wrapping counter (RAPL) so that no two reads are a whole wrap apart."""
        while not self._stop.wait(POLL_S):
            with self._lock:
                if "cpu" not in self.counters:
                    return
                try:
                    self.counters["cpu"][0].joules()
                except (Missing, OSError):
                    return  # epoch() reads it next and says so

    def epoch(self) -> dict[str, float]:
        """Joules of the epoch that just ended (since the previous call) and of the run so far, per counter."""
        try:
            totals = json.loads(self.totals_path.read_text())
        except (OSError, ValueError):
            totals = {}
        metrics: dict[str, float] = {}
        with self._lock:
            for name, (counter, before) in list(self.counters.items()):
                try:
                    now = counter.joules()
                except (Missing, OSError) as e:  # a counter that stops answering is dropped, and the tag says so
                    del self.counters[name]
                    self.status[name] = str(e) if isinstance(e, Missing) else f"missing: stopped answering ({e})"
                    continue
                self.counters[name] = (counter, now)
                totals[name] = float(totals.get(name, 0.0)) + (now - before)
                metrics[f"energy_{name}_j"] = now - before
                metrics[f"energy_{name}_run_j"] = totals[name]
        if metrics:
            write_bytes(self.totals_path, json.dumps(totals).encode())
        return metrics
