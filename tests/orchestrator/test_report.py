"""The results table read back from a real MLflow store: runs that differ in anything but the seed never share a
table cell, the labels say how they differ, and the seeds of one experiment are averaged. The runs are created
through the project's tracking code (Tracker, base_tags) from configs composed from conf/, as run_cell creates them."""
from __future__ import annotations

import csv
import hashlib
import io
import json

from orchestrator.report import table as report
from orchestrator.report.__main__ import main as report_command
from tests.orchestrator.helpers import record_run


def record(workdir, accuracy: float, *overrides: str, tagged: bool = True) -> str:
    """A finished run of the cell `overrides` describe, with `accuracy` as its final test accuracy; its identity."""
    return record_run(workdir, accuracy, *overrides, tagged=tagged)


def lines(text: str) -> list[str]:
    """The first markdown table of `text` (the accuracy table; the comparisons with the baseline follow it)."""
    table = []
    for line in text.splitlines():
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    return table


def test_exact_gradients_and_two_tables_of_one_name_are_separate_columns(workdir, capsys):
    import ops

    (workdir.path / "a").mkdir()
    (workdir.path / "b").mkdir()
    table_a, table_b = workdir.path / "a" / "t.bin", workdir.path / "b" / "t.bin"
    ops.write_table("am16", str(table_a))
    ops.write_table("mit16", str(table_b))
    hash_a, hash_b = (hashlib.sha256(p.read_bytes()).hexdigest() for p in (table_a, table_b))
    assert hash_a != hash_b
    record(workdir, 0.90, "mult=am16", "seed=0")
    record(workdir, 0.92, "mult=am16", "seed=1")
    record(workdir, 0.80, "mult=am16", "mult.exact_gradients=true")
    record(workdir, 0.70, "mult=lut", f"mult.table={table_a}")
    record(workdir, 0.60, "mult=lut", f"mult.table={table_b}")
    record(workdir, 0.95, "mult=native")
    record(workdir, 0.85, "model=lenet5", "mult=am16")

    luts = sorted([(hash_a, "0.7000"), (hash_b, "0.6000")])
    expected = [
        "| Final test accuracy (digits) | native | am16 mult.exact_gradients=false | am16 mult.exact_gradients=true | "
        + " | ".join(f"lut:t.bin#{h[:8]}" for h, _ in luts) + " |",
        "|---|---|---|---|---|---|",
        "| lenet300 | 0.9500 | 0.9100 ± 0.0141 (n=2) | 0.8000 | " + " | ".join(v for _, v in luts) + " |",
        "| lenet5 |  | 0.8500 |  |  |  |",  # blank: nobody ran lenet5 there
    ]
    rows = report.collect(workdir.uri, "amdnn")
    assert len(rows) == 7
    assert lines(report.markdown(rows)) == expected

    # The command prints the same table; its CSV gives each run's setting, equal exactly for the two seeds.
    csv_path = workdir.path / "report.csv"
    assert report_command(["--tracking-uri", workdir.uri, "--experiment", "amdnn", "--csv", str(csv_path),
                        "--out", str(workdir.path / "reports")]) == 0
    assert lines(capsys.readouterr().out) == expected
    by_seed = {(r["mult"], r["seed"], r["test_accuracy"]): json.loads(r["setting"])
               for r in csv.DictReader(io.StringIO(csv_path.read_text()))}
    assert len(by_seed) == 7
    seed0, seed1 = by_seed[("am16", "0", "0.9")], by_seed[("am16", "1", "0.92")]
    assert seed0 == seed1 and seed0["mult.exact_gradients"] == "False" and "seed" not in seed0
    assert by_seed[("am16", "0", "0.8")]["mult.exact_gradients"] == "True"
    assert {by_seed[("lut:t.bin", "0", a)]["mult.table_sha256"] for a in ("0.7", "0.6")} == {hash_a, hash_b}


def test_train_settings_swept_are_labelled_and_per_model_recipes_share_a_column(workdir):
    record(workdir, 0.91, "train.optimizer.lr=0.05")
    record(workdir, 0.81, "train.optimizer.lr=0.2")
    record(workdir, 0.71, "model=lenet5", "train.optimizer.lr=0.01")
    assert lines(report.markdown(report.collect(workdir.uri, "amdnn"))) == [
        "| Final test accuracy (digits) | am16 train.optimizer.lr=0.01 | am16 train.optimizer.lr=0.05 | "
        "am16 train.optimizer.lr=0.2 |",
        "|---|---|---|---|",
        "| lenet300 |  | 0.9100 | 0.8100 |",
        "| lenet5 | 0.7100 |  |  |",
    ]
    # lenet5 alone at its own rate: one experiment per model and multiplier, one plain column
    other = type(workdir)(workdir.path / "other")
    record(other, 0.91, "train.optimizer.lr=0.05")
    record(other, 0.71, "model=lenet5", "train.optimizer.lr=0.01")
    assert lines(report.markdown(report.collect(other.uri, "amdnn"))) == [
        "| Final test accuracy (digits) | am16 |", "|---|---|", "| lenet300 | 0.9100 |", "| lenet5 | 0.7100 |"]


def test_runs_from_before_the_setting_tag_join_their_experiment_by_params(workdir):
    record(workdir, 0.90, "seed=0", tagged=False)
    record(workdir, 0.92, "seed=1", tagged=False)
    record(workdir, 0.94, "seed=2")
    record(workdir, 0.50, "seed=0", "train.epochs=1", tagged=False)
    assert lines(report.markdown(report.collect(workdir.uri, "amdnn"))) == [
        "| Final test accuracy (digits) | am16 train.epochs=1 | am16 train.epochs=15 |", "|---|---|---|",
        "| lenet300 | 0.5000 | 0.9200 ± 0.0200 (n=3) |"]


def test_the_engines_are_separate_columns_and_the_default_one_is_named():
    """A cell's engine is part of its identity only when it is not the default: a table holding both names both."""
    setting = {"model.name": "resnet18", "mult.name": "am16", "dataset.name": "fashion_mnist", "train.epochs": "8"}
    rows = [report.Row("a", "resnet18", "am16", "fashion_mnist", "0", "FINISHED", 0.93, "r1", dict(setting)),
            report.Row("b", "resnet18", "am16", "fashion_mnist", "0", "FINISHED", 0.94, "r2",
                       {**setting, "engine": "torch"})]
    columns, body = report.grid(rows)
    assert columns == ["am16 engine=tensorflow", "am16 engine=torch"]
    assert [[run.test_accuracy for run in cell] for cell in body[0][1]] == [[0.93], [0.94]]
