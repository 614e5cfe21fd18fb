"""What a finished local sweep leaves in MLflow for the dashboard, and what it printed on the way: tags to filter by,
the dataset input with its checksum, the experiment's description, energy counters reported missing with the reason
(never 0), MLflow's system metrics, progress lines, and no CUDA probe noise on a machine without a GPU."""
from __future__ import annotations

import hashlib
import json
import re

from orchestrator.cell.devices import nvidia_driver_present


def test_runs_carry_tags_to_filter_by_and_the_experiment_says_what_it_is(finished_grid):
    client = finished_grid.client()
    exp = client.get_experiment_by_name("amdnn")
    assert "each run is one cell" in exp.tags["mlflow.note.content"]
    runs = finished_grid.runs()
    assert sorted(r.data.tags["amdnn.mult"] for r in runs) == ["am16", "native"]
    for run in runs:
        tags = run.data.tags
        assert run.info.status == "FINISHED"
        assert (tags["amdnn.model"], tags["amdnn.dataset"], tags["amdnn.seed"]) == ("lenet300", "digits", "0")
        assert tags["amdnn.host"] and tags["amdnn.device"].startswith(("cpu: x86-64", "gpu: "))
        if tags["amdnn.mult"] == "native":
            assert tags["amdnn.ops_build"].startswith("none (mult=native")
        else:  # the ops' cache folder: CPU target, TensorFlow version, build key
            assert re.fullmatch(r"x86-64[\w-]*-tf2\.21\.\d+-[0-9a-f]{20}", tags["amdnn.ops_build"]), tags
    (am16,) = client.search_runs([exp.experiment_id], "tags.`amdnn.mult` = 'am16'")
    assert am16.data.tags["amdnn.mult"] == "am16" and am16.data.metrics["final_test_accuracy"] > 0.5


def test_the_dataset_input_is_the_data_trained_on(finished_grid):
    from models import datasets

    data = datasets.load("digits")
    md5 = hashlib.md5(usedforsecurity=False)
    for array in (data.x_train, data.y_train, data.x_test, data.y_test):
        md5.update(str((array.dtype.str, array.shape)).encode())
        md5.update(array.tobytes())
    for run in finished_grid.runs():
        (given,) = run.inputs.dataset_inputs
        assert (given.dataset.name, given.dataset.digest) == ("digits", md5.hexdigest())
        assert [(t.key, t.value) for t in given.tags] == [("mlflow.data.context", "train")]
        assert json.loads(given.dataset.profile) == {"num_rows": 1438, "num_test_rows": 359, "num_classes": 10}
        features = json.loads(json.loads(given.dataset.schema)["mlflow_tensorspec"]["features"])
        assert features[0]["tensor-spec"] == {"dtype": "float32", "shape": [-1, 8, 8, 1]}


def test_missing_energy_counters_are_tags_never_zeros_and_system_metrics_are_logged(finished_grid):
    client = finished_grid.client()
    for run in finished_grid.runs():
        tags, metrics = run.data.tags, run.data.metrics
        for counter in ("gpu", "cpu"):
            tag = tags[f"amdnn.energy_{counter}"]
            if tag.startswith(("missing: ", "not measured: ")):
                assert not any(k.startswith(f"energy_{counter}") for k in metrics), metrics
            else:  # this machine has the counter: one value per epoch, and the run's total is their sum
                per_epoch = [m.value for m in client.get_metric_history(run.info.run_id, f"energy_{counter}_j")]
                assert len(per_epoch) == 2 and all(v > 0 for v in per_epoch)
                assert metrics[f"energy_{counter}_run_j"] == sum(per_epoch)
        assert tags["amdnn.system_metrics"].startswith("cpu, memory, disk, network")
        cpu = client.get_metric_history(run.info.run_id, "system/cpu_utilization_percentage")
        memory = client.get_metric_history(run.info.run_id, "system/system_memory_usage_megabytes")
        assert cpu and memory and all(0 < m.value < 1e7 for m in memory)


def test_the_sweep_shows_progress_and_no_cuda_probe_noise(finished_grid):
    out = finished_grid.output
    assert "[amdnn] sweep: cell 1 of 2 (lenet300 x native, digits, seed 0); 0 done (0 finished, 0 failed) in " in out
    second = re.search(r"\[amdnn\] sweep: cell 2 of 2 \(lenet300 x am16, digits, seed 0\); 1 done \(1 finished, "
                       r"0 failed\) in [\dhms]+; about [\dhms]+ left", out)
    assert second, out[-3000:]
    assert re.search(r"\[cell 1/2\] lenet300/native/digits s0 epoch 1/2 .* about [\dhms]+ left in this cell", out)
    assert "[cell 2/2] lenet300/am16/digits s0 epoch 2/2" in out
    if not nvidia_driver_present():
        assert "cuInit" not in out and "Could not find cuda drivers" not in out, out[-3000:]
