"""What a cell's MLflow run records about where and on what it trained: the tags a user filters the dashboard by
(device, host, job id, ops build) and the dataset input that fills the dashboard's Dataset column.

Set by the training process at each attempt (a resumed cell may run on another node, another device, another build).
What depends on the engine (its GPUs, its ops build, its framework's CUDA) each engine's module answers
(orchestrator.cell.engines.module).
"""
from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any

from models.datasets.locate import find_files
from models.datasets.registry import get_spec
from ops.build import cpu_target

from orchestrator.cell import engines
from orchestrator.common.cellfiles import job_id


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or 'unknown CPU'."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return "unknown CPU"


def device(engine: str = "tensorflow") -> str:
    """'gpu: <name>' where the engine trains on a GPU, else 'cpu: <x86-64 level the ops run at> (<model name>)'."""
    gpu = engines.module(engine).gpu_name()  # the engine's framework, loaded already in its cell's process
    return f"gpu: {gpu}" if gpu else f"cpu: {cpu_target()[0]} ({cpu_model()})"


def ops_build(simulated: bool, engine: str = "tensorflow") -> str:
    """The ops build the run used: its cache folder name (CPU target, TensorFlow or torch, [CUDA], key), or the
    engine's NATIVE_BUILD where the run simulates no multiplier."""
    return engines.module(engine).ops_build(simulated)


def nvml_facts(nvml: Any = None) -> dict[str, str]:
    """The NVIDIA driver's version and the CUDA version it supports, from NVML; what was missing, if it was."""
    try:
        if nvml is None:
            import pynvml as nvml  # nvidia-ml-py
        nvml.nvmlInit()
        try:
            driver = nvml.nvmlSystemGetDriverVersion()
            cuda = nvml.nvmlSystemGetCudaDriverVersion_v2()  # e.g. 13000 for 13.0
        finally:
            nvml.nvmlShutdown()
    except Exception as missing:  # no pynvml, no driver, or an NVML too old for the call: say which
        return {"amdnn.gpu_driver": f"unknown ({type(missing).__name__}: {missing})"[:250]}
    driver = driver.decode() if isinstance(driver, bytes) else str(driver)
    return {"amdnn.gpu_driver": driver, "amdnn.gpu_driver_cuda": f"{cuda // 1000}.{cuda % 1000 // 10}"}


def gpu_facts(simulated: bool, engine: str = "tensorflow") -> dict[str, str]:
    """On a GPU: the driver and its CUDA (NVML), the CUDA the framework was built with, and the CUDA release and
    architectures of the ops' GPU kernels; {} on a machine where the engine sees no GPU."""
    framework = engines.module(engine).gpu_facts(simulated)  # {} where the engine sees no GPU
    return {**nvml_facts(), **framework} if framework else {}


def attempt_tags(simulated: bool, engine: str = "tensorflow") -> dict[str, str]:
    """The tags of this attempt: host, job id, engine, device, ops build, and on a GPU its driver and CUDA versions."""
    tags = {"amdnn.host": socket.gethostname(), "amdnn.engine": engine, "amdnn.device": device(engine),
            "amdnn.ops_build": ops_build(simulated, engine), **gpu_facts(simulated, engine)}
    if job_id():
        tags["amdnn.job_id"] = job_id()  # type: ignore[assignment]
    return tags


def data_digest(data: Any) -> str:
    """MD5 of exactly the arrays trained and tested on (32 hex digits: MLflow keeps at most 36)."""
    digest = hashlib.md5(usedforsecurity=False)
    for array in (data.x_train, data.y_train, data.x_test, data.y_test):
        digest.update(str((array.dtype.str, array.shape)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def data_source(name: str, data_dir: str | None) -> tuple[str, str]:
    """(source_type, source JSON) of MLflow's dataset sources: the folder the files were read from, or the bundled
    loader."""
    spec = get_spec(name)
    if not spec.files:
        return "code", json.dumps({"tags": {"mlflow.source.name": f"models.datasets.{name} (bundled)"}})
    folder = next(iter(find_files(spec, data_dir).values())).parent
    return "local", json.dumps({"uri": str(folder)})


def dataset_input(data: Any, data_dir: str | None) -> dict[str, str]:
    """mlflow.entities.Dataset's fields for the loaded dataset `data`: name, digest (the checksum above), source,
    schema (MLflow's tensor spec of one example and its label) and profile (sizes)."""
    source_type, source = data_source(data.name, data_dir)
    spec = lambda array: {"type": "tensor", "tensor-spec": {"dtype": str(array.dtype),  # noqa: E731
                                                             "shape": [-1, *array.shape[1:]]}}
    schema = {"mlflow_tensorspec": {"features": json.dumps([spec(data.x_train)]),
                                    "targets": json.dumps([spec(data.y_train)])}}
    profile = {"num_rows": len(data.x_train), "num_test_rows": len(data.x_test), "num_classes": data.num_classes}
    return {"name": data.name, "digest": data_digest(data), "source_type": source_type, "source": source,
            "schema": json.dumps(schema), "profile": json.dumps(profile)}


def record(tracker: Any, data: Any, data_dir: str | None, simulated: bool,
           engine: str = "tensorflow") -> dict[str, str]:
    """Queue this attempt's tags and the dataset input on the cell's run; return the tags."""
    tags = attempt_tags(simulated, engine)
    tracker.set_tags(tags)
    tracker.log_dataset(dataset_input(data, data_dir))
    return tags

