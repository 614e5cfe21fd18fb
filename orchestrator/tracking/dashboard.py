"""Where MLflow's UI shows a grid, and what it shows first: the addresses the launcher, the report and the docs give.

MLflow 3.17's UI opens an experiment on its GenAI side unless the address says otherwise: its workflow switch is
the query parameter `workflowType=machine_learning`, else the browser's local storage (key mlflow.workflowType),
and the experiment tag mlflow.experimentKind is not read while the switch exists (MLflow's
experiment-kind hook). Its runs table shows the columns a browser chose before (local storage), else Source,
Models and Dataset; a saved view, the experiment tag `mlflow.sharedViewState.<key>`, is the one place a store can
name columns, and the address `?viewStateShareKey=<key>` opens it (it is listed under Views, too). So every
experiment gets the view VIEW_KEY (the writer tags it), and the addresses below open the training side with it.
"""
from __future__ import annotations

import json
import os
import time

VIEW_KEY = "amdnn"
VIEW_TAG = f"mlflow.sharedViewState.{VIEW_KEY}"
VIEW_NAME = "AMDNN: accuracy, model, mult, dataset, seed, epochs"
UI_VARIABLE = "AMDNN_DASHBOARD_URL"   # where `mlflow ui` answers, if not at its default address
UI_DEFAULT = "http://127.0.0.1:5000"  # `mlflow ui`'s own default host and port
FINAL_KEY = "final_test_accuracy"  # the result of a cell (tracking.tracker re-exports it)
ENERGY_KEY = "mult_relative_energy"  # sum over layers of MACs x relative energy per multiply, over the MACs (step 0)
POWER_KEY = "mult_relative_power"    # the same sum of relative power (models.layer_list.network_power)
# The runs table's columns, as MLflow's UI names them (<group>.`<key>`), in this order.
COLUMNS = ["metrics.`final_test_accuracy`", "tags.`amdnn.model`", "tags.`amdnn.mult`", "tags.`amdnn.dataset`",
           "tags.`amdnn.seed`", "params.`train.epochs`", "attributes.`Dataset`"]


def view_tag_value(created_ms: int | None = None) -> str:
    """The saved view, in MLflow 3.17's envelope ({name, createdAt, updatedAt, state}: its saved-views module)."""
    # No sort: MLflow's UI nests runs under their parent only in its default order (newest first) with no filter.
    state = {"selectedColumns": COLUMNS}
    now = int(time.time() * 1000) if created_ms is None else created_ms
    return json.dumps({"name": VIEW_NAME, "createdAt": now, "updatedAt": now, "state": json.dumps(state)})


def ui_base(uri: str) -> str:
    """The UI's address for a tracking URI: a server is its own UI; a store file is shown by `mlflow ui`, at
    $AMDNN_DASHBOARD_URL or its default address."""
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    return os.environ.get(UI_VARIABLE, UI_DEFAULT).rstrip("/")


def runs_url(base: str, experiment_id: str) -> str:
    """The experiment's runs, on the training side, with the project's columns."""
    return f"{base}/#/experiments/{experiment_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"


def run_url(base: str, run_id: str) -> str:
    """One run's page (MLflow's direct route: it finds the experiment itself)."""
    return f"{base}/#/runs/{run_id}"


def experiment_runs_url(uri: str, experiment: str) -> str | None:
    """runs_url of the experiment named `experiment` in the store at `uri`, None if it has none yet."""
    from mlflow.tracking import MlflowClient  # MLflow (seconds to import) only where an address is asked for

    exp = MlflowClient(uri).get_experiment_by_name(experiment)
    return None if exp is None else runs_url(ui_base(uri), exp.experiment_id)
