"""Per-layer multipliers in a cell: the identity of a cell without rules is the one it always had, a cell's identity is
its resolved per-layer map (however the rules were written), bad rules are refused before anything runs, and a real
cell logs its map (a param and a table artifact), its label and its relative multiplication energy to MLflow."""
import json
import pickle
import shutil
from pathlib import Path

import pytest

from orchestrator.config.cell import LAYER_MAP_PARAM, CellConfig, resolve
from orchestrator.config.identity import base_tags, cell_identity, defining_config, mult_label
from orchestrator.config.validate import ConfigError, validate

from tests.orchestrator.helpers import TINY, compose, launch, record_run, run_data

LUTS = Path(__file__).resolve().parents[1] / "data" / "approxtrain-luts"
FIRST_LAST = "mult.layers=[{match:first,mult:native},{match:last,mult:native}]"


def test_cells_without_rules_keep_their_identities():
    """Hashes computed before per-layer rules existed (commit 174a217): checkpoints and runs stay theirs."""
    assert cell_identity(compose()) == "c661c46b145e1f0660d32d4eda0f22b0c5dd32468d771227027817424f8a40e2"
    assert cell_identity(compose("model=resnet18", "dataset=cifar10", "mult=am32")) == \
        "288274f92fa4c0acd0b1f9749307d482743780d9cec9fd42f4d9711c9f2b5749"
    assert cell_identity(compose("model=lenet5", "mult=native", "engine=torch")) == \
        "9373140be22d4e638c6a3010fab41cb63ca38b4f3581901597becbcde32dbc27"
    assert defining_config(compose())["mult"] == {"name": "am16", "exact_gradients": False}
    assert mult_label(validate(compose())) == "am16"


def test_identity_is_the_resolved_map():
    base = cell_identity(compose("model=lenet5"))
    kept = compose("model=lenet5", "mult.keep=first_last")
    assert cell_identity(kept) != base
    assert cell_identity(kept) == cell_identity(compose("model=lenet5", FIRST_LAST))  # the same map, written twice
    assert cell_identity(compose("model=lenet5", "mult.layers=[{match:'conv*',mult:am16}]")) == base  # no change
    assert cell_identity(compose("model=lenet5", "mult.layers=[{match:fc1,mult:mit16}]")) != \
        cell_identity(compose("model=lenet5", "mult.layers=[{match:fc1,mult:mit16,exact_gradients:true}]"))
    assert defining_config(kept)["mult"]["layers"] == {
        "conv1": {"name": "native", "exact_gradients": False},
        "predictions": {"name": "native", "exact_gradients": False}}
    c = validate(kept)
    assert mult_label(c) == "am16 [first,last: native]"
    # by role, so that one column of the report holds every model under the preset
    assert mult_label(validate(compose("model=resnet18", "mult.keep=first_last"))) == "am16 [first,last: native]"
    assert base_tags(cell_identity(c), c)["amdnn.mult"] == "am16 [first,last: native]"


def test_a_table_per_layer_counts_by_its_contents(tmp_path):
    a, b = (shutil.copy(LUTS / "MIT_7.bin", tmp_path / name) for name in ("a.bin", "b.bin"))
    ida, idb = (cell_identity(compose(f"mult.layers=[{{match:fc2,mult:lut,table:'{p}'}}]")) for p in (a, b))
    assert ida == idb
    layers = defining_config(compose(f"mult.layers=[{{match:fc2,mult:lut,table:'{a}'}}]"))["mult"]["layers"]
    assert set(layers["fc2"]) == {"name", "exact_gradients", "table_sha256"}


@pytest.mark.parametrize(("overrides", "message"), [
    (("model=lenet5", "mult.layers=[{match:stage4,mult:mit16}]"), "'stage4' matches no layer of lenet5"),
    (("mult.layers=[{match:fc1,mult:am8}]",), "unknown multiplier 'am8'; valid choices: native, acc32"),
    (("mult.keep=ends",), "mult.keep='ends' is not a preset; valid presets: first, last, first_last"),
    (("mult.keep=first_last", "mult.layers=[{match:'fc*',mult:mit16}]"),
     "gives fc1 mit16, but mult.keep=first_last keeps it exact"),
])
def test_bad_rules_are_refused_at_validation(overrides, message):
    with pytest.raises(ConfigError, match="invalid AMDNN config") as error:
        validate(compose(*overrides))
    assert message in str(error.value)


def test_the_resolved_cell_carries_its_layers():
    cell = resolve(compose("model=lenet5", "mult.keep=first", "mult.layers=[{match:fc2,mult:mit16}]"))
    assert cell.mult.layer_multipliers() == {"conv1": ("native", False), "fc2": ("mit16", False)}
    assert CellConfig.from_json(cell.to_json()) == cell and pickle.loads(pickle.dumps(cell)) == cell
    assert json.loads(cell.layer_params()[LAYER_MAP_PARAM]) == {
        "conv1": "native", "conv2": "am16", "fc1": "am16", "fc2": "mit16", "predictions": "am16"}
    plain = resolve(compose())
    assert plain.mult.layers == {} and plain.layer_params() == {}
    older = json.loads(plain.to_json())  # a job's run-config.json written before rules existed
    del older["mult"]["layers"]
    assert CellConfig.from_json(json.dumps(older)) == plain


def test_a_cell_logs_its_layer_map_and_energy(workdir, tmp_path):
    """lenet300 on digits, native but fc2 under a table whose side file says half the exact multiplier's energy:
    (64 x 300 + 0.5 x 300 x 100 + 100 x 10) / (64 x 300 + 300 x 100 + 100 x 10) by hand."""
    from mlflow.tracking import MlflowClient

    from orchestrator.cell.run import run_cell

    table = shutil.copy(LUTS / "MBM_7.bin", tmp_path / "HALF.bin")
    (tmp_path / "HALF.cost.json").write_text(json.dumps({"energy": 0.5, "power": 0.4,
                                                         "source": "a test's own figure"}))
    result = run_cell(workdir.cfg(*TINY, "train.epochs=1", f"mult.layers=[{{match:fc2,mult:'lut:{table}'}}]"),
                      supervise=False)
    assert result.status == "finished", result.error
    data = run_data(workdir.uri, result.run_id)
    assert data["tags"]["amdnn.mult"] == "native [fc2: lut:HALF.bin]"
    assert json.loads(data["params"][LAYER_MAP_PARAM]) == {"fc1": "native", "fc2": "lut:HALF.bin",
                                                           "predictions": "native"}
    assert data["metrics"]["mult_relative_energy"] == [(0, pytest.approx((19_200 + 15_000 + 1_000) / 50_200))]
    assert data["metrics"]["mult_relative_power"] == [(0, pytest.approx((19_200 + 12_000 + 1_000) / 50_200))]
    files = {f.path for f in MlflowClient(workdir.uri).list_artifacts(result.run_id, "layers")}
    assert files == {"layers/layer-map.md", "layers/layer-map.csv"}
    table_text = Path(MlflowClient(workdir.uri).download_artifacts(result.run_id, "layers/layer-map.md",
                                                                   str(tmp_path))).read_text()
    assert "| fc2 | dense |  | 300 | 300x100 | 100 | 30,000 | 59.76 % | lut:HALF.bin |  | 0.500 | 0.400 |" in table_text
    # the report's columns: the map in the label, beside the same cell without rules
    from orchestrator.report import table as report

    record_run(workdir, 0.9, *TINY, "train.epochs=1")
    header = report.markdown(report.collect(workdir.uri, "amdnn")).splitlines()[0]
    assert header == "| Final test accuracy (digits) | native | native [fc2: lut:HALF.bin] |"


def test_a_launch_with_a_bad_rule_submits_nothing(tmp_path):
    result = launch(tmp_path, "-m", "model=lenet5,resnet18", "mult.layers=[{match:stage4,mult:mit16}]", timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "sweep refused, nothing launched" in result.stderr
    assert "'stage4' matches no layer of lenet5; lenet5's layers are conv1, conv2, fc1, fc2, predictions" \
        in result.stderr
    assert not (tmp_path / "ck").exists()

