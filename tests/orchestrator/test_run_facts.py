"""orchestrator.cell.run_facts without a GPU: what the run records when NVML is missing (the real driver's facts are
checked on the GPU machine by tests/device/test_energy_gpu.py), and the tags of a CPU attempt."""

from __future__ import annotations

from orchestrator.cell import run_facts


class Nvml:
    """An NVML that answers like the driver's library (none can run here: no NVIDIA driver on this machine)."""

    def __init__(self, fail=None):
        self.fail, self.open = fail, 0

    def nvmlInit(self):
        if self.fail:
            raise self.fail
        self.open += 1

    def nvmlShutdown(self):
        self.open -= 1

    def nvmlSystemGetDriverVersion(self):
        return b"580.159.04"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 13000


def test_driver_and_cuda_version_as_nvml_gives_them():
    nvml = Nvml()
    assert run_facts.nvml_facts(nvml) == {"amdnn.gpu_driver": "580.159.04", "amdnn.gpu_driver_cuda": "13.0"}
    assert nvml.open == 0  # shut down again


def test_a_missing_driver_is_said_not_guessed():
    facts = run_facts.nvml_facts(Nvml(fail=RuntimeError("NVML Shared Library Not Found")))
    assert facts == {"amdnn.gpu_driver": "unknown (RuntimeError: NVML Shared Library Not Found)"}


def test_a_cpu_attempt_has_no_gpu_facts():
    tags = run_facts.attempt_tags(simulated=False)
    from orchestrator.cell.engines import tf_engine  # TensorFlow, as attempt_tags loaded it for its engine

    assert tags["amdnn.device"].startswith("cpu: x86-64")
    assert tags["amdnn.ops_build"] == tf_engine.NATIVE_BUILD == "none (mult=native: TensorFlow's own ops)"
    assert not any(key.startswith(("amdnn.gpu", "amdnn.ops_cuda", "amdnn.tensorflow_cuda")) for key in tags)
