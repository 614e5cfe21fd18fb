"""Like with like, and statistics over seeds, in the report read back from real MLflow stores: runs logged through
the project's Tracker from configs composed from conf/, with mixed epochs, mixed overrides and several seeds.
Differences exist only between cells of one setting; each is the paired mean over the shared seeds with its Student t
95 % interval, computed here by hand; curves carry the seeds' spread, and an unfinished seed is drawn dashed, in its
column's colour in every panel and file."""
from __future__ import annotations

import csv
import io
import math
import statistics

import numpy as np
import pytest

from orchestrator.report import comparisons as compare, figures, files as report_files, table as report
from orchestrator.report.__main__ import main as report_command
from orchestrator.report.histories import grid_curves
from tests.orchestrator.helpers import record_run

# Student t quantiles t(0.975, df) from the table (two-sided 95 %), to check the report's own computation
T_975 = {1: 12.706204736174698, 2: 4.302652729749464}


def by_hand(cell: dict, baseline: dict) -> tuple[list[str], float, float, float]:
    """(shared seeds, mean difference, interval low, interval high) of two {seed: accuracy} cells."""
    seeds = sorted(cell.keys() & baseline.keys())
    d = [cell[s] - baseline[s] for s in seeds]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    half = T_975[len(d) - 1] * sd / math.sqrt(len(d))
    return seeds, mean, mean - half, mean + half


def record_cells(workdir, cells: dict) -> None:
    """cells: {overrides (a tuple): {seed: final accuracy}}."""
    for overrides, seeds in cells.items():
        for seed, accuracy in seeds.items():
            record_run(workdir, accuracy, *overrides, f"seed={seed}")


def table_lines(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {title}"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


NATIVE_3 = ("mult=native", "train.epochs=3")
AM16_3 = ("mult=am16", "train.epochs=3")
AM16_20 = ("mult=am16", "train.epochs=20")


def test_mixed_epochs_give_no_cross_setting_difference(workdir, capsys, tmp_path):
    seeds = {NATIVE_3: {"0": 0.90, "1": 0.86}, AM16_3: {"0": 0.88, "1": 0.85, "2": 0.87},
             AM16_20: {"0": 0.97, "1": 0.96}}
    record_cells(workdir, seeds)
    rows = report.collect(workdir.uri, "amdnn")
    ((dataset, columns, body),) = report.tables(rows)
    # every column says what sets it apart, the baseline's too
    assert columns == ["native train.epochs=3", "am16 train.epochs=3", "am16 train.epochs=20"]
    assert body == [("lenet300", ["0.8800 ± 0.0283 (n=2)", "0.8667 ± 0.0153 (n=3)", "0.9650 ± 0.0071 (n=2)"])]

    found = {c.column: c for c in compare.comparisons(rows)}
    assert found["native train.epochs=3"].baseline is None and found["native train.epochs=3"].paired is None
    # 20 epochs of am16 against 3 of native (+8.5 points) is no difference: there is no baseline of its setting
    assert found["am16 train.epochs=20"].baseline is None and found["am16 train.epochs=20"].paired is None
    p = found["am16 train.epochs=3"].paired
    assert found["am16 train.epochs=3"].baseline == "native train.epochs=3"
    shared, mean, low, high = by_hand(seeds[AM16_3], seeds[NATIVE_3])
    assert list(p.seeds) == shared == ["0", "1"]   # seed 2 has no native run: not paired
    assert (p.mean, p.low, p.high) == pytest.approx((mean, low, high), rel=1e-12)
    assert (mean, low, high) == pytest.approx((-0.015, -0.0785310, 0.0485310), abs=1e-6)

    # the heatmap's difference panel holds that one difference and nothing across settings
    data = report_files.heatmap_data(rows)[dataset]
    differences = data["differences"]
    assert math.isnan(differences[0, 0]) and math.isnan(differences[0, 2])
    assert differences[0, 1] == pytest.approx(mean, rel=1e-12)
    assert data["difference_texts"][0] == ["baseline", "-1.5\n[-7.9, +4.9] (n=2)", "no baseline\nof this setting"]
    fig = figures.heatmap(dataset, **data)
    scale = [ax for ax in fig.axes if ax.images][1].images[0].norm
    assert (scale.vmin, scale.vmax) == pytest.approx((-1.5, 1.5))   # the scale spans like-with-like differences
    figures.pyplot().close(fig)

    # printed and in the files: what the report covers, and the comparison with its interval and method
    assert report_command(["--tracking-uri", workdir.uri, "--experiment", "amdnn", "--out", str(tmp_path / "r"),
                           "--no-mlflow"]) == 0
    printed = capsys.readouterr().out
    assert "Covers every cell run of experiment amdnn: 7 run(s), 7 finished;" in printed
    assert table_lines(printed, "Against the baseline") == [
        "| Against the baseline (digits) | baseline | difference, paired Student t, 95 % two-sided, over the seeds "
        "both cells finished | seeds |", "|---|---|---|---|",
        "| lenet300 × am16 train.epochs=3 | native train.epochs=3 | -1.50 pp [-7.85, +4.85] (n=2) | 0, 1 |",
        "| lenet300 × am16 train.epochs=20 |  | no native or acc32 run of this setting: no difference shown |  |"]
    assert printed.split("\n[amdnn]")[0].strip() == (tmp_path / "r" / "report.md").read_text().strip()
    cells = {line["column"]: line for line in csv.DictReader(io.StringIO((tmp_path / "r" / "cells.csv").read_text()))}
    assert set(cells) == set(columns)
    line = cells["am16 train.epochs=3"]
    assert (line["n"], line["seeds_finished"], line["pairs"], line["paired_seeds"]) == ("3", "0 1 2", "2", "0 1")
    assert float(line["mean"]) == pytest.approx(statistics.fmean(seeds[AM16_3].values()), rel=1e-12)
    assert float(line["std"]) == pytest.approx(statistics.stdev(seeds[AM16_3].values()), rel=1e-12)
    assert [float(line[k]) for k in ("mean_difference", "ci_low", "ci_high")] == pytest.approx([mean, low, high],
                                                                                               rel=1e-12)
    assert line["interval"].startswith("paired Student t, 95 %")
    assert all(cells["am16 train.epochs=20"][k] == "" for k in ("baseline", "mean_difference", "ci_low", "ci_high"))
    page = (tmp_path / "r" / "report.html").read_text()
    assert "-1.50 pp [-7.85, +4.85] (n=2)" in page and "paired Student t, 95 % two-sided" in page
    assert "Covers every cell run of experiment amdnn" in page


def test_mixed_overrides_and_per_model_recipes_pair_only_like_with_like(workdir):
    seeds = {("mult=native",): {"0": 0.95, "1": 0.94, "2": 0.96},
             ("mult=am16",): {"0": 0.93, "1": 0.935, "2": 0.94},
             ("mult=am16", "train.optimizer.lr=0.05"): {"0": 0.99, "1": 0.98},
             ("model=lenet5", "mult=native"): {"0": 0.91, "1": 0.90},     # lenet5's own recipe, also at lr 0.02
             ("model=lenet5", "mult=am16"): {"0": 0.89, "1": 0.895}}
    record_cells(workdir, seeds)
    rows = report.collect(workdir.uri, "amdnn")
    ((_, columns, body),) = report.grids(rows)
    assert columns == ["native train.optimizer.lr=0.02", "am16 train.optimizer.lr=0.02",
                       "am16 train.optimizer.lr=0.05"]
    assert [(row, [len(runs) for runs in cells]) for row, cells in body] == [("lenet300", [3, 3, 2]),
                                                                             ("lenet5", [2, 2, 0])]
    assert report.tables(rows)[0][2][1] == ("lenet5", ["0.9050 ± 0.0071 (n=2)", "0.8925 ± 0.0035 (n=2)", ""])

    found = {(c.row, c.column): c for c in compare.comparisons(rows)}
    assert set(found) == {(row, column) for row in ("lenet300", "lenet5") for column in columns} - {
        ("lenet5", "am16 train.optimizer.lr=0.05")}   # a cell nobody ran is no comparison
    assert found[("lenet300", "am16 train.optimizer.lr=0.05")].paired is None
    for row, cell, baseline in (("lenet300", ("mult=am16",), ("mult=native",)),
                                ("lenet5", ("model=lenet5", "mult=am16"), ("model=lenet5", "mult=native"))):
        c = found[(row, "am16 train.optimizer.lr=0.02")]
        assert c.baseline == "native train.optimizer.lr=0.02"   # its own row's native: lenet5 against lenet5
        shared, mean, low, high = by_hand(seeds[cell], seeds[baseline])
        assert list(c.paired.seeds) == shared
        assert (c.paired.mean, c.paired.low, c.paired.high) == pytest.approx((mean, low, high), rel=1e-12)
    lenet300 = found[("lenet300", "am16 train.optimizer.lr=0.02")].paired
    assert lenet300.n == 3 and (lenet300.mean, lenet300.high - lenet300.mean) == pytest.approx(
        (-0.015, 4.302652729749464 * statistics.stdev([-0.02, -0.005, -0.02]) / math.sqrt(3)), rel=1e-9)
    differences = report_files.heatmap_data(rows)["digits"]["differences"]
    assert np.isnan(differences[:, [0, 2]]).all()   # no baseline's difference, none for lr 0.05
    assert differences[:, 1] == pytest.approx([lenet300.mean, found[("lenet5", columns[1])].paired.mean])


def test_curves_show_the_seeds_spread_and_partial_runs_in_one_colour_per_column(workdir, tmp_path, monkeypatch):
    curve = {("native", "0"): [(0.80, 0.60), (0.85, 0.40), (0.90, 0.30)],
             ("native", "1"): [(0.78, 0.65), (0.86, 0.42), (0.88, 0.31)],
             ("am16", "0"): [(0.70, 0.80), (0.80, 0.50), (0.84, 0.45)],
             ("am16", "1"): [(0.74, 0.70), (0.78, 0.55), (0.86, 0.40)]}
    for dataset in ("digits", "mnist"):
        for (mult, seed), points in curve.items():
            record_run(workdir, points[-1][0], f"mult={mult}", f"seed={seed}", f"dataset={dataset}", epochs=points)
        record_run(workdir, None, "mult=am16", "seed=2", f"dataset={dataset}", status="KILLED",
                   epochs=[(0.50, 1.20), (0.55, 1.00)])
        record_run(workdir, None, "mult=native", "seed=2", f"dataset={dataset}", status="RUNNING",
                   epochs=[(0.60, 0.90)])
    rows = report.collect(workdir.uri, "amdnn")
    assert report.tables(rows)[0][2] == [("lenet300", ["0.8900 ± 0.0141 (n=2)", "0.8500 ± 0.0141 (n=2)"])]

    curves = grid_curves(workdir.uri, rows)["digits"]["lenet300"]
    for mult in ("native", "am16"):
        seeds = [curve[(mult, "0")], curve[(mult, "1")]]
        assert [p[0] for p in curves[mult].mean] == [1, 2, 3] and {p[5] for p in curves[mult].mean} == {2}
        for index, column in ((1, 0), (2, 1)):   # accuracy, loss: the finished seeds' mean and standard deviation
            values = [[s[e][column] for s in seeds] for e in range(3)]
            assert [p[index] for p in curves[mult].mean] == pytest.approx([statistics.fmean(v) for v in values])
            assert [p[index + 2] for p in curves[mult].mean] == pytest.approx([statistics.stdev(v) for v in values])
    assert curves["am16"].partial == [("2", "KILLED", [(1, 0.50, 1.20), (2, 0.55, 1.00)])]
    assert curves["native"].partial == [("2", "RUNNING", [(1, 0.60, 0.90)])]

    drawn = {}   # the figures as write_report draws them, before they are saved and closed
    save = figures.save

    def keep(fig, path):
        drawn[path.name] = [{line.get_label(): (line.get_color(), line.get_linestyle()) for line in ax.lines}
                            for ax in fig.axes]
        drawn[path.name + " bands"] = [len(ax.collections) for ax in fig.axes]
        save(fig, path)

    monkeypatch.setattr(figures, "save", keep)
    report_files.write_report(rows, tmp_path / "r", "amdnn", workdir.uri)
    colours = figures.colours(report.multipliers(rows))
    assert colours["native"] != colours["am16"]
    for dataset in ("digits", "mnist"):
        panels = drawn[f"curves-{dataset}.png"]
        assert len(panels) == 2 and panels[0] == panels[1]   # the accuracy and loss panels: the same lines
        assert panels[0] == {
            "native (mean of 2 seeds ± std)": (colours["native"], "-"),
            "native seed 2 (running, partial)": (colours["native"], "--"),
            "am16 (mean of 2 seeds ± std)": (colours["am16"], "-"),
            "am16 seed 2 (killed, partial)": (colours["am16"], "--")}
        assert drawn[f"curves-{dataset}.png bands"] == [2, 2]   # a spread band per column and panel
    page = (tmp_path / "r" / "report.html").read_text()
    hex_of = {label: "#" + "".join(f"{round(255 * c):02x}" for c in colour[:3]) for label, colour in colours.items()}
    assert page.count(f"background:{hex_of['am16']}'></span>am16</th>") == 2   # the same colour in both tables


def test_native_is_the_baseline_and_acc32_is_compared_with_it_once():
    """native has no baseline (it is the baseline); acc32 is compared with native, not native with acc32 as well (the
    same number twice with its sign turned); every other multiplier with native, else with acc32."""
    from types import SimpleNamespace

    def cell(mult, epochs="3"):
        return [SimpleNamespace(mult=mult, setting={"model": "resnet18", "train.epochs": epochs, "mult.name": mult})]

    row = [cell("native"), cell("acc32"), cell("am16"), cell("am32", "20"), cell("acc32", "20")]
    assert compare.baselines(row) == [None, 0, 0, 4, None]
