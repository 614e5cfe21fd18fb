"""The results table: final test accuracy of every cell, model x multiplier, read back from MLflow (what
`python -m orchestrator.report` prints; report.files writes it as files).

One table per data set; rows in the model registry's order, columns in ops.names() order (tables last). A table cell
holds one experiment: the runs whose defining config (orchestrator.config.identity) is the same but for the seed,
shown as their mean, with the spread and count. Runs that differ in anything else are never averaged together: where
two experiments of one model differ, the labels show the settings that tell them apart, on every column of the table,
the baseline's too (`native train.epochs=3`, `am16 train.epochs=20`; `am16 mult.exact_gradients=true`; a table's
content hash, `lut:MBM_7.bin#1a2b3c4d`, where two tables share a file name). A cell that has not finished shows its
state (running, failed, killed, not started for a cell launched but without a run yet); a cell nobody ran is blank.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from models.engines import DEFAULT_ENGINE
from ops.modes.multipliers import TABLE_NAMES

from orchestrator.config.cell import LAYER_MAP_PARAM
from orchestrator.config.identity import DEFINING_KEYS, SEED_KEY, without_seed
from orchestrator.config.validate import model_names, mult_names
from orchestrator.tracking.reads import cell_runs
from orchestrator.tracking.tracker import ENERGY_KEY, FINAL_KEY, POWER_KEY, TAG_CELL, TAG_DEFINING, flatten

TABLE_HASH = "mult.table_sha256"   # the setting key of a table's contents (identity.defining_config)
HASH_SHOWN = 8                     # hex digits of a table's hash in a label: enough to tell a grid's tables apart
NOT_STARTED = "not started"      # a cell of the launch (table.missing_rows) without an MLflow run yet
# Defining keys an identity leaves out at their default (identity.defining_config): a label shows the default.
DEFAULTS_LEFT_OUT = {"engine": DEFAULT_ENGINE}


@dataclass
class Row:
    identity: str
    model: str
    mult: str
    dataset: str
    seed: str
    status: str                    # MLflow run status: FINISHED, RUNNING, FAILED, KILLED, or MISSING (no run yet)
    test_accuracy: float | None
    run_id: str | None
    # The defining config minus the seed, flattened ({"train.epochs": "15", ...}): equal settings = seeds of one
    # experiment. Empty where nothing is known (then rows group by model and multiplier label alone).
    setting: dict[str, str] = field(default_factory=dict)
    energy: float | None = None    # the run's relative multiplication energy (ENERGY_KEY), where its figures exist
    power: float | None = None     # and power (POWER_KEY)
    # Every layer's multiplier label ({"conv1": "native", "conv2": "am16"}) of a run whose layers differ (the
    # param mult.layer_map); empty where every layer takes the column's multiplier.
    layers: dict[str, str] = field(default_factory=dict)


def setting_of(defining: Mapping[str, Any]) -> dict[str, str]:
    """The setting of a defining config (identity.defining_config): without the seed, flattened to strings."""
    return flatten(without_seed(defining))


def _setting_of_run(tags: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    text = tags.get(TAG_DEFINING)
    if text:
        try:
            return setting_of(json.loads(text))
        except ValueError:
            pass
    # A run logged before the tag existed: the same keys from its params, a table by its path (not its contents).
    setting = {k: v for k, v in params.items() if k.split(".")[0] in DEFINING_KEYS and k != SEED_KEY}
    if setting.get("mult.name") not in TABLE_NAMES:
        setting.pop("mult.table", None)
    # Per-layer rules count by the map they resolve to, which the multiplier label carries (config.identity); the
    # empty defaults of a run logged since the keys exist match the runs from before them.
    for key in ("mult.keep", "mult.layers", LAYER_MAP_PARAM):
        setting.pop(key, None)
    if setting.get("train.calibration_batches") in ("0", "None"):  # as in the identity: 0 is the cell of before
        setting.pop("train.calibration_batches")
    if setting.get("mult.table_gradients") in ("False", "None"):  # likewise: false is the cell of before the key
        setting.pop("mult.table_gradients")
    return setting


def _layer_map(params: Mapping[str, str]) -> dict[str, str]:
    try:
        value = json.loads(params.get(LAYER_MAP_PARAM) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def collect(uri: str, experiment: str, identities: Iterable[str] | None = None) -> list[Row]:
    """One Row per cell run in `experiment` (only those of `identities` if given; missing ones as MISSING): the
    newest run of each identity."""
    wanted = list(identities) if identities is not None else None
    rows: dict[str, Row] = {}
    for run in cell_runs(uri, experiment):
        tags = run.tags
        identity = tags.get(TAG_CELL, "")
        if wanted is not None and identity not in wanted or identity in rows:
            continue
        rows[identity] = Row(identity, tags.get("amdnn.model", "?"), tags.get("amdnn.mult", "?"),
                             tags.get("amdnn.dataset", "?"), tags.get("amdnn.seed", "?"), run.status,
                             run.metrics.get(FINAL_KEY), run.run_id, _setting_of_run(tags, run.params),
                             run.metrics.get(ENERGY_KEY), run.metrics.get(POWER_KEY), _layer_map(run.params))
    return list(rows.values())


def missing_rows(cells: Sequence[dict], found: Iterable[Row]) -> list[Row]:
    """Rows for cells (dicts with identity, model, mult, dataset, seed, and defining: the defining config) that have
    no MLflow run yet."""
    have = {row.identity for row in found}
    return [Row(c["identity"], c["model"], c["mult"], c["dataset"], str(c["seed"]), "MISSING", None, None,
                setting_of(c["defining"]) if c.get("defining") else {})
            for c in cells if c["identity"] not in have]


def _order(values: set[str], preferred: Sequence[str]) -> list[str]:
    return [v for v in preferred if v in values] + sorted(values - set(preferred))


def finished_accuracies(rows: Sequence[Row]) -> list[float]:
    """The final test accuracies of the finished runs among `rows` (one table cell's seeds)."""
    return [r.test_accuracy for r in rows if r.status == "FINISHED" and r.test_accuracy is not None]


def cell_mean(rows: Sequence[Row]) -> float | None:
    """The number a table cell stands for (the mean over its finished seeds), None while none has finished."""
    done = finished_accuracies(rows)
    return statistics.fmean(done) if done else None


def cell_text(rows: Sequence[Row]) -> str:
    done = finished_accuracies(rows)
    if done:
        mean = statistics.fmean(done)
        if len(done) == 1:
            return f"{mean:.4f}"
        return f"{mean:.4f} ± {statistics.stdev(done):.4f} (n={len(done)})"
    states = {r.status for r in rows}
    for state, text in (("RUNNING", "running"), ("FAILED", "failed"), ("KILLED", "killed"),
                        ("MISSING", NOT_STARTED)):
        if state in states:
            return text
    return ""   # nobody ran this model under this column's multiplier and setting: nothing to say


# An experiment: (model, multiplier label, setting as sorted items). Its runs are seeds of one another.
Experiment = tuple[str, str, tuple[tuple[str, str], ...]]


def _experiments(rows: Sequence[Row]) -> dict[Experiment, list[Row]]:
    groups: dict[Experiment, list[Row]] = defaultdict(list)
    for r in rows:
        groups[(r.model, r.mult, tuple(sorted(r.setting.items())))].append(r)
    return groups


def _differing(settings: Sequence[Mapping[str, str]]) -> set[str]:
    """The keys in which the settings differ (a key some lack counts as differing)."""
    return {key for key in set().union(*settings) if len({s.get(key) for s in settings}) > 1} if settings else set()


def _shown_keys(experiments: Iterable[Experiment]) -> tuple[dict[str, set[str]], dict[tuple[str, str], set[str]]]:
    """The setting keys the labels show: per model, its model.* keys in which its experiments differ (row labels);
    per (model, multiplier), the keys its columns show. A multiplier's own keys (mult.*) are shown where that
    multiplier's experiments of one model differ in them; any other key (the recipe, epochs, engine...) in which a
    model's experiments differ, whatever their multipliers, is shown on every column of that model's row, the
    baseline's too, so that a column never hides a setting its neighbours do not share."""
    by_model: dict[str, list[dict]] = defaultdict(list)
    by_mult: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for model, mult, setting in experiments:
        by_model[model].append(dict(setting))
        by_mult[(model, mult)].append(dict(setting))
    row_keys, shared = {}, {}
    for model, settings in by_model.items():
        keys = _differing(settings)
        row_keys[model] = {k for k in keys if k.startswith("model.") and k != "model.name"}
        shared[model] = {k for k in keys if not k.startswith(("model.", "mult.")) and k != "dataset.name"}
    column_keys = {(model, mult): shared[model] | {k for k in _differing(settings)
                                                   if k.startswith("mult.") and k != "mult.name"}
                   for (model, mult), settings in by_mult.items()}
    return row_keys, column_keys


def _value(text: str | None) -> str:
    """A setting's value as an override writes it (the flattened config holds Python's str())."""
    return {None: "-", "True": "true", "False": "false", "None": "null"}.get(text, text)  # type: ignore[arg-type]


def _sort_key(text: str | None) -> tuple:
    """Numbers in numeric order (lr 0.01 < 0.2 < 10), before any other value in text order."""
    try:
        return (0, float(text), "")  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return (1, 0.0, str(text))


def _label(base: str, setting: Mapping[str, str], keys: Sequence[str]) -> str:
    shown = [base + (f"#{setting[TABLE_HASH][:HASH_SHOWN]}" if TABLE_HASH in keys and TABLE_HASH in setting else "")]
    values = {k: _value(setting.get(k, DEFAULTS_LEFT_OUT.get(k))) for k in keys if k != TABLE_HASH}
    return " ".join(shown + [f"{k}={value}" for k, value in values.items()])


def grid(rows: Sequence[Row], model_order: Sequence[str] = (), mult_order: Sequence[str] = ()) \
        -> tuple[list[str], list[tuple[str, list[list[Row]]]]]:
    """One data set's table: the column labels and, per row label, the runs of each cell ([] where nobody ran that
    model under that column). Two experiments never share a cell: the model's own differing settings go into the
    row label, every other one into the column labels (_shown_keys)."""
    groups = _experiments(rows)
    row_keys, model_column_keys = _shown_keys(groups)
    column_keys: dict[str, set[str]] = defaultdict(set)   # multiplier label -> the keys its columns show
    for (_, mult), keys in model_column_keys.items():
        column_keys[mult] |= keys
    models, mults = _order({m for m, _, _ in groups}, model_order), _order({m for _, m, _ in groups}, mult_order)
    cells: dict[tuple[str, str], list[Row]] = {}
    row_labels: dict[str, tuple] = {}
    column_labels: dict[str, tuple] = {}
    for (model, mult, items), runs in groups.items():
        setting = dict(items)
        shown_row, shown_column = sorted(row_keys[model]), sorted(column_keys[mult])
        row, column = _label(model, setting, shown_row), _label(mult, setting, shown_column)
        row_labels[row] = (models.index(model), tuple(_sort_key(setting.get(k)) for k in shown_row))
        column_labels[column] = (mults.index(mult), tuple(_sort_key(setting.get(k)) for k in shown_column))
        assert (row, column) not in cells, f"two experiments labelled {row} x {column}"
        cells[(row, column)] = runs
    rows_out = sorted(row_labels, key=row_labels.__getitem__)
    columns = sorted(column_labels, key=column_labels.__getitem__)
    return columns, [(row, [cells.get((row, column), []) for column in columns]) for row in rows_out]


def orders() -> tuple[list[str], list[str]]:
    """The registries' orders of models and multipliers: the rows' and columns' order in every table."""
    try:
        return model_names(), mult_names()
    except Exception:  # noqa: BLE001 - a report must print even where models/ops cannot be imported
        return [], []


def multipliers(rows: Sequence[Row]) -> list[str]:
    """Every registered multiplier, then the other labels of `rows` (tables) in name order: what the figures give
    one colour each, so that a multiplier has the same colour in every report."""
    registered = orders()[1]
    return registered + sorted({r.mult for r in rows} - set(registered))


def column_multipliers(body: Sequence[tuple[str, list[list[Row]]]]) -> list[str]:
    """The multiplier label of each column of a table (grid's body): that of any run in it."""
    return [next(cell[0].mult for cell in column if cell) for column in zip(*(cells for _, cells in body))]


def grids(rows: Sequence[Row]) -> list[tuple[str, list[str], list[tuple[str, list[list[Row]]]]]]:
    """(data set, column labels, [(row label, the runs of each cell)]) for each data set, in name order: what
    every form of the report (markdown, CSV, HTML, heatmap) shows."""
    model_order, mult_order = orders()
    return [(dataset, *grid([r for r in rows if r.dataset == dataset], model_order, mult_order))
            for dataset in sorted({r.dataset for r in rows})]


def tables(rows: Sequence[Row]) -> list[tuple[str, list[str], list[tuple[str, list[str]]]]]:
    """(data set, column labels, [(row label, cell texts)]) for each data set, in name order."""
    return [(dataset, columns, [(row, [cell_text(runs) for runs in cells]) for row, cells in body])
            for dataset, columns, body in grids(rows)]


def markdown(rows: Sequence[Row]) -> str:
    """Markdown tables (one per data set) of final test accuracy, model x multiplier."""
    if not rows:
        return "(no runs found)"
    out = []
    for dataset, columns, body in tables(rows):
        lines = [f"| Final test accuracy ({dataset}) | " + " | ".join(columns) + " |",
                 "|---|" + "---|" * len(columns)]
        lines += [f"| {row} | " + " | ".join(cells) + " |" for row, cells in body]
        out.append("\n".join(lines))
    return "\n\n".join(out)


def to_csv(rows: Sequence[Row]) -> str:
    """One line per cell run: model, mult, dataset, seed, status, test_accuracy, run_id, identity, and its setting
    (the defining config but the seed, as JSON: lines with equal settings are seeds of one experiment)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["model", "mult", "dataset", "seed", "status", "test_accuracy", "run_id", "identity", "setting"])
    for r in sorted(rows, key=lambda r: (r.dataset, r.model, r.mult, sorted(r.setting.items()), r.seed)):
        writer.writerow([r.model, r.mult, r.dataset, r.seed, r.status,
                         "" if r.test_accuracy is None else repr(r.test_accuracy), r.run_id or "", r.identity,
                         json.dumps(r.setting, sort_keys=True)])
    return buffer.getvalue()
