"""The exploration commands as a user runs them: `python -m orchestrator.explore sensitivity` trains its grid through
launch.py (real cells on digits, a real MLflow store), the report finds the study in the runs, and the search reads
it back: a study of one layer has no mix between its ends, and the search says so before launching anything."""
from __future__ import annotations

import subprocess

import pytest

from orchestrator.report import sensitivity
from orchestrator.report.table import collect
from tests.orchestrator.helpers import PYTHON, REPO, env


def explore(workdir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "orchestrator.explore", *args, "model=lenet300", "mult=am16",
                           "dataset=digits", "train.epochs=1", "train.batch_size=64", *workdir.overrides,
                           f"hydra.sweep.dir={workdir.path / 'sweep'}"],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_sensitivity_command_trains_its_grid_and_the_report_finds_the_study(workdir):
    done = explore(workdir, "sensitivity", "--layers", "last")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[amdnn] python " in done.stdout and "'mult.layers=choice([]," in done.stdout  # the command, to rerun
    rows = collect(workdir.uri, "amdnn")
    assert sorted(r.mult for r in rows) == ["am16", "native", "native [last: am16]"]
    assert {r.status for r in rows} == {"FINISHED"}
    (study,) = sensitivity.studies(rows)
    accuracy = {r.mult: r.test_accuracy for r in rows}
    (layer,) = study.layers
    assert (study.mult, study.kind, layer.layer) == ("am16", sensitivity.APPROXIMATE_ONE, "predictions")
    assert layer.versus.mean == accuracy["native [last: am16]"] - accuracy["native"]
    assert [r.test_accuracy for r in study.other_end] == [accuracy["am16"]]
    assert (workdir.path / "sweep" / "sensitivity.csv").exists()

    again = explore(workdir, "search")
    assert again.returncode == 2 and "no mix between its ends that it has not run already" in again.stderr, again.stderr[-2000:]
