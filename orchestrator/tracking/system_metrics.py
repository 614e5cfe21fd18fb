"""MLflow's system metrics of a cell's training process (config: system_metrics=true): CPU and memory use, disk and
network, and GPU use where NVML works, sampled by MLflow's own monitors and logged as the run's system/* metrics,
which the dashboard shows in its System metrics tab.

MLflow's SystemMetricsMonitor would write to the store itself; the samples go through the cell's durable tracking
queue instead, like every other record (orchestrator.tracking.tracker), so that an unavailable store loses none and a
compute node writes nothing but its queue. The step of a sample is the seconds since the cell's first start (its
first `start` event), so the samples of every attempt line up on one axis and none repeats a step.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from orchestrator.common import cellfiles

PREFIX = "system/"
SAMPLE_S = 10.0          # MLflow's default sampling interval; each sample is logged (MLflow's default batches 1)


def monitors() -> tuple[list, str]:
    """MLflow's monitors that work here, and a line saying which (GPU: why not, when NVML is not there)."""
    # MLflow only in the process that samples: importing the cell's modules (status, report) loads none
    from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
    from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
    from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

    found = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
    try:
        from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor  # in the try: it fails without NVML

        found.append(GPUMonitor())
        gpu = "gpu"
    except Exception as e:  # noqa: BLE001 - GPUMonitor raises a bare RuntimeError without NVML
        gpu = f"no gpu ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})"
    return found, f"cpu, memory, disk, network, {gpu}"


class SystemSampler:
    """A daemon thread that samples every SAMPLE_S seconds and queues the aggregated samples on the tracker."""

    def __init__(self, tracker: Any, cell_dir: Path, sample_s: float = SAMPLE_S) -> None:
        self.tracker, self.sample_s = tracker, sample_s
        starts = [e["time"] for e in cellfiles.events(cell_dir) if e["event"] == "start"]
        self.origin = starts[0] if starts else time.time()
        self.monitors, self.what = monitors()
        self.sample()  # psutil's CPU percentages count from the previous call: the first one always reads 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="amdnn-system-metrics", daemon=True)

    def start(self) -> "SystemSampler":
        self.tracker.set_tags({"amdnn.system_metrics": self.what})
        self._thread.start()
        return self

    def sample(self) -> dict[str, float]:
        """One sample of every monitor, aggregated as MLflow aggregates them, with the system/ prefix."""
        metrics: dict[str, float] = {}
        for monitor in self.monitors:
            monitor.collect_metrics()
            metrics.update({PREFIX + k: float(v) for k, v in monitor.aggregate_metrics().items()})
            monitor.clear_metrics()
        return metrics

    def _log(self) -> None:
        metrics = self.sample()
        if metrics:
            self.tracker.log_metrics(int(time.time() - self.origin), metrics, check=next(iter(metrics)))

    def _run(self) -> None:
        while not self._stop.wait(self.sample_s):
            self._log()

    def stop(self) -> None:
        """Stop sampling, with one last sample: an attempt shorter than SAMPLE_S still logs one."""
        self._stop.set()
        self._thread.join(timeout=self.sample_s + 5)
        self._log()
