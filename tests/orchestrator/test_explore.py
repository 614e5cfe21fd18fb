"""Design-space exploration without training: the sensitivity grid's cells as launch.py composes them (Hydra's own
sweep expansion of the command's overrides, every cell resolved from conf/), and the report's layer sensitivity,
accuracy-cost front and greedy search read back from a real MLflow store whose runs are logged through the project's
Tracker with known accuracies and costs. Every expected number is computed here by hand."""
from __future__ import annotations

import csv
import io

import pytest
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser

from orchestrator.config.cell import resolve
from orchestrator.explore import grid, search, sensitivity as grid_sensitivity
from orchestrator.report import files as report_files, front, sensitivity
from orchestrator.report.table import collect
from tests.orchestrator.helpers import REPO, record_run

LENET5 = ["conv1", "conv2", "fc1", "fc2", "predictions"]
# LeNet-5's multiply-accumulates per image on digits (padded to 32x32), by hand: output elements x kernel H*W*Cin
MACS = {"conv1": 28 * 28 * 6 * 25, "conv2": 10 * 10 * 16 * 150, "fc1": 400 * 120, "fc2": 120 * 84,
        "predictions": 84 * 10}
TOTAL = sum(MACS.values())   # 416,520
TABLE = REPO / "tests" / "data" / "approxtrain-luts" / "MBM_7.bin"


def cells(workdir, overrides: list[str]):
    """Every cell of a multirun of `overrides`, as Hydra's basic sweeper splits it and conf/ composes it."""
    jobs = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(overrides), None)[0]
    return [resolve(workdir.cfg(*job)) for job in jobs]


def test_the_approximate_one_grid_is_one_cell_per_layer_and_both_ends(workdir):
    study = grid.parse(["model=lenet5", "mult=am16", "train.epochs=2"])
    found = cells(workdir, grid_sensitivity.overrides(study))
    assert [c.mult.label for c in found] == ["native", "am16", "native [first: am16]", "native [conv2: am16]",
                                             "native [fc1: am16]", "native [fc2: am16]", "native [last: am16]"]
    assert {c.train.epochs for c in found} == {2}
    assert len({c.identity for c in found}) == 7
    # The all-am16 end is the cell mult=am16 itself: same identity and folder, so a grid that ran it trains nothing
    plain = resolve(workdir.cfg("model=lenet5", "mult=am16", "train.epochs=2"))
    assert (found[1].identity, found[1].name, found[1].mult.spec, dict(found[1].mult.layers)) == \
        (plain.identity, plain.name, "am16", {})
    assert found[0].identity == resolve(workdir.cfg("model=lenet5", "mult=native", "train.epochs=2")).identity
    assert dict(found[3].mult.layers) == {"conv2": {"spec": "am16", "exact_gradients": False}}


def test_the_exact_one_grid_keeps_one_layer_native_per_cell(workdir):
    two = cells(workdir, grid_sensitivity.overrides(grid.parse(["model=lenet5", "mult=am16,mit16"]),
                                                    grid_sensitivity.EXACT_ONE))
    # no all-native end with two multipliers: it would be one cell launched twice
    assert sorted(c.mult.label for c in two) == sorted(
        label for m in ("am16", "mit16")
        for label in [m, *(f"{m} [{role}: native]" for role in ("first", "conv2", "fc1", "fc2", "last"))])
    one = cells(workdir, grid_sensitivity.overrides(grid.parse(["model=lenet5", "mult=am16"]),
                                                    grid_sensitivity.EXACT_ONE, ["fc*"]))
    assert [c.mult.label for c in one] == ["am16", "native", "am16 [fc1: native]", "am16 [fc2: native]"]
    assert one[1].identity == resolve(workdir.cfg("model=lenet5", "mult=native")).identity


def test_a_table_multiplier_reaches_the_cells_by_its_absolute_path(workdir, tmp_path):
    table = tmp_path / "my tables" / "MBM_7.v2.bin"
    table.parent.mkdir()
    table.write_bytes(TABLE.read_bytes())
    found = cells(workdir, grid_sensitivity.overrides(grid.parse(["model=lenet300", f"mult=lut:{table}"]),
                                                      grid_sensitivity.APPROXIMATE_ONE, ["last"]))
    assert [c.mult.label for c in found] == ["native", "lut:MBM_7.v2.bin", "native [last: lut:MBM_7.v2.bin]"]
    assert dict(found[2].mult.layers) == {"predictions": {"spec": f"lut:{table}", "exact_gradients": False}}


def test_a_study_that_cannot_be_made_says_every_problem_before_anything_runs():
    with pytest.raises(grid.StudyError) as e:
        grid.parse(["model=lenet5,resnet18", "mult=native,am17", "mult.keep=first"])
    text = str(e.value)
    assert "a study is of one model" in text and "mult=native: a study needs an approximate multiplier" in text
    assert "mult='am17' is not a multiplier" in text and "the study sets mult.layers and mult.keep itself" in text
    with pytest.raises(grid.StudyError, match="matches no layer of lenet5"):
        grid.parse(["model=lenet5", "mult=am16"]).layers(["stage4"])


def _log_study(workdir) -> dict:
    """An approximate-one study of LeNet-5 under MBM_7 (a table with a side file: energy 0.4), seeds 0 and 1, with
    the accuracies below; returns them."""
    cost = TABLE.with_name("MBM_7.cost.json")
    assert not cost.exists()
    accuracy = {"native": (0.90, 0.92), "all": (0.80, 0.84), "conv1": (0.89, 0.90), "conv2": (0.84, 0.87),
                "fc1": (0.90, 0.90), "fc2": (0.91, 0.93), "predictions": (0.70, 0.74)}
    common = ["model=lenet5", "train.epochs=2"]
    for seed in (0, 1):
        record_run(workdir, accuracy["native"][seed], *common, "mult=native", f"seed={seed}",
                   start_metrics={"mult_relative_energy": 1.0})
        record_run(workdir, accuracy["all"][seed], *common, "mult=lut", f"mult.table={TABLE}", f"seed={seed}")
        for layer in LENET5:
            record_run(workdir, accuracy[layer][seed], *common, "mult=native", f"seed={seed}",
                       f"mult.layers=[{{match:{layer},mult:'lut:{TABLE}'}}]")
    return accuracy


def test_the_report_finds_the_sensitivity_study_and_pairs_each_layer_with_the_reference(workdir):
    accuracy = _log_study(workdir)
    rows = collect(workdir.uri, "amdnn")
    (study,) = sensitivity.studies(rows)
    assert (study.model, study.dataset, study.mult, study.kind) == ("lenet5", "digits", "lut:MBM_7.bin",
                                                                    sensitivity.APPROXIMATE_ONE)
    assert [r.test_accuracy for r in sorted(study.other_end, key=lambda r: r.seed)] == list(accuracy["all"])
    for layer in study.layers:
        by_hand = sum(accuracy[layer.layer][s] - accuracy["native"][s] for s in (0, 1)) / 2
        assert layer.versus.mean == pytest.approx(by_hand) and layer.versus.n == 2
        assert layer.share == pytest.approx(MACS[layer.layer] / TOTAL)
    text = sensitivity.markdown([study])
    assert "| conv2 | 57.62 % | 0.8550 (n=2) | -5.50 pp" in text and "| predictions | 0.20 % |" in text
    lines = list(csv.DictReader(io.StringIO(sensitivity.to_csv([study]))))
    assert [line["layer"] for line in lines] == LENET5
    assert float(lines[4]["difference_mean"]) == pytest.approx(-0.19)


def test_the_search_orders_layers_by_accuracy_lost_per_share_and_proposes_each_prefix(workdir):
    accuracy = _log_study(workdir)
    rows = collect(workdir.uri, "amdnn")
    study = grid.parse(["model=lenet5", f"mult=lut:{TABLE}", "train.epochs=2"])
    ranked, lengths, overrides = search.search_rows(rows, study, "digits", sensitivity.APPROXIMATE_ONE, None)
    loss = {layer: -sum(accuracy[layer][s] - accuracy["native"][s] for s in (0, 1)) / 2 for layer in LENET5}
    by_hand = sorted(LENET5, key=lambda l: (loss[l] / (MACS[l] / TOTAL), -MACS[l]))
    assert [r.layer for r in ranked] == by_hand == ["fc2", "conv1", "fc1", "conv2", "predictions"]
    assert lengths == [2, 3, 4]  # k = 1, the first layer alone, is a cell of the study already
    proposed = cells(workdir, overrides)
    assert [sorted(c.mult.layers) for c in proposed] == [sorted(by_hand[:k]) for k in (2, 3, 4)]
    assert {c.train.epochs for c in proposed} == {2}
    assert search.prefix_lengths(4, 2) == [1, 3] and search.prefix_lengths(20, 3) == [1, 10, 19]
    assert search.prefix_lengths(20, 4, [1]) == [2, 8, 13, 19]
    assert search.predicted(ranked, 2, 0.25) == pytest.approx(1 - 0.75 * (MACS["fc2"] + MACS["conv1"]) / TOTAL)
    with pytest.raises(grid.StudyError, match="no finished approximate-one study of lenet5 on digits"):
        search.search_rows(rows, grid.parse(["model=lenet5", f"mult=lut:{TABLE}", "train.epochs=3"]), "digits",
                           sensitivity.APPROXIMATE_ONE, None)


def test_the_front_marks_the_cells_no_other_beats_on_accuracy_and_cost(workdir):
    # (overrides, final accuracy, step-0 metrics): energies where known, power only for one, none for am16
    logged = [(["mult=native"], 0.90, {"mult_relative_energy": 1.0, "mult_relative_power": 1.0}),
              (["mult=acc32"], 0.91, {"mult_relative_energy": 1.0, "mult_relative_power": 1.0}),
              (["mult=acc16"], 0.88, {"mult_relative_energy": 0.6}),
              (["mult=fp16"], 0.85, {"mult_relative_energy": 0.7}),
              (["mult=mit16"], 0.80, {"mult_relative_energy": 0.3}),
              (["mult=mit32"], 0.79, {"mult_relative_power": 0.2}),
              (["mult=am16"], 0.95, {})]
    for overrides, accuracy, metrics in logged:
        record_run(workdir, accuracy, "model=lenet300", *overrides, start_metrics=metrics)
    (panel,) = front.fronts(collect(workdir.uri, "amdnn"))
    assert panel.figure == "energy" and panel.without == ("am16", "mit32")  # in the table's column order
    assert [(p.label, p.cost, p.optimal) for p in panel.points] == [
        ("mit16", 0.3, True), ("acc16", 0.6, True), ("fp16", 0.7, False), ("acc32", 1.0, True),
        ("native", 1.0, False)]
    assert front.pareto([(1, 0.5), (1, 0.5), (2, 0.4)]) == [True, True, False]
    text = front.markdown([panel])
    assert "| 1 | mit16 | 0.3000 | 0.8000 | 1 |" in text and "5 cells placed, 2 behind the front" in text
    lines = list(csv.DictReader(io.StringIO(front.to_csv([panel]))))
    assert [(line["cell"], line["pareto_optimal"]) for line in lines][:2] == [("mit16", "1"), ("acc16", "1")]


def test_the_report_files_hold_the_front_and_the_study(workdir, tmp_path):
    _log_study(workdir)
    for mult, accuracy, energy in (("native", 0.9, 1.0), ("acc16", 0.8, 0.5)):
        record_run(workdir, accuracy, "model=lenet300", f"mult={mult}", start_metrics={"mult_relative_energy": energy})
    rows = collect(workdir.uri, "amdnn")
    # LeNet-5's table has no side file: only its native cell has an energy, and one cell is no front
    assert [(f.model, len(f.points)) for f in front.fronts(rows)] == [("lenet300", 2)]
    written = report_files.write_report(rows, tmp_path / "report", "amdnn")
    names = {p.name for p in written}
    assert {"front.csv", "sensitivity.csv", "front-digits.png", "sensitivity-digits-lenet5-1.png"} <= names
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Layer sensitivity: lenet5 on digits: lut:MBM_7.bin in one layer, the rest native" in page
    assert "lenet300: accuracy against relative multiplication energy" in page
    assert "| 1 | acc16 | 0.5000 | 0.8000 | 1 |" in (tmp_path / "report" / "report.md").read_text()
