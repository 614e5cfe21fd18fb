"""Layer sensitivity read back from a grid's runs: what approximating one layer (or keeping one exact) does to the
final test accuracy, beside the layer's share of the network's multiply-accumulates.

A study is found from the runs' per-layer maps (the param mult.layer_map), however its cells were launched
(`python -m orchestrator.explore sensitivity` makes them):

    approximate-one   every layer native but one, under multiplier M; its reference is the all-native cell, its other
                      end the all-M cell
    exact-one         every layer under M but one, kept native; its reference is the all-M cell, its other end the
                      all-native cell

Cells of one study share their setting but for the multiplier (model, data set, recipe, epochs, engine: every
defining key outside mult.*, as report.comparisons pairs a cell with its baseline), and each layer's difference to the
reference is paired over the seeds both have finished (report.paired). A layer whose cells have not finished, or a
reference not run, is listed without a difference.

    studies(rows)           every Study in the rows, by data set, model, multiplier and kind
    markdown(found), to_csv(found)
"""
from __future__ import annotations

import csv
import functools
import io
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from models.layer_names import am_layer_names

from orchestrator.report.comparisons import comparable, finished_by_seed
from orchestrator.report.paired import Paired, paired, points_text
from orchestrator.report.table import Row, finished_accuracies

NATIVE = "native"
APPROXIMATE_ONE, EXACT_ONE = "approximate-one", "exact-one"
KINDS = (APPROXIMATE_ONE, EXACT_ONE)
GRADIENTS_SUFFIX = " exact_gradients"   # as CellConfig.layer_params writes a layer with exact gradients


@dataclass(frozen=True)
class LayerResult:
    layer: str
    share: float | None             # of the network's multiply-accumulates per image; None where unknown
    runs: tuple[Row, ...]           # the layer's cell: its seeds
    versus: Paired | None           # the cell against the study's reference, over the seeds both finished

    @property
    def accuracy(self) -> float | None:
        done = finished_accuracies(self.runs)
        return statistics.fmean(done) if done else None


@dataclass(frozen=True)
class Study:
    dataset: str
    model: str
    mult: str                       # the multiplier label M (with " exact_gradients" where only the forward is)
    kind: str                       # APPROXIMATE_ONE or EXACT_ONE
    setting: tuple[tuple[str, str], ...]   # what its cells share (comparisons.comparable)
    reference: tuple[Row, ...]      # all native (approximate-one) or all M (exact-one): the differences' zero
    other_end: tuple[Row, ...]      # the opposite uniform cell
    layers: tuple[LayerResult, ...]  # in the network's layer order

    @property
    def reference_label(self) -> str:
        return NATIVE if self.kind == APPROXIMATE_ONE else self.mult

    @property
    def other_label(self) -> str:
        return self.mult if self.kind == APPROXIMATE_ONE else NATIVE

    @property
    def title(self) -> str:
        what = f"{self.mult} in one layer, the rest native" if self.kind == APPROXIMATE_ONE else \
            f"one layer native, the rest {self.mult}"
        return f"{self.model} on {self.dataset}: {what}"


def layer_labels(row: Row) -> dict[str, str] | None:
    """Every layer's multiplier label of a run (its map, or its one multiplier for all), None for an unknown model."""
    try:
        names = am_layer_names(row.model)
    except (KeyError, ValueError):
        return None
    if row.layers:
        return {name: row.layers.get(name, "?") for name in names}
    label = row.mult + (GRADIENTS_SUFFIX if row.setting.get("mult.exact_gradients") == "True" else "")
    return dict.fromkeys(names, label)


def _mean(runs: Sequence[Row]) -> float | None:
    done = finished_accuracies(runs)
    return statistics.fmean(done) if done else None


@functools.lru_cache(maxsize=None)  # a network is built once per report, however many studies share it
def _shares(model: str, dataset: str) -> dict[str, float]:
    """Each layer's share of the network's multiply-accumulates (models.layer_list builds the network: Keras, only
    where a study is reported); {} where the network cannot be built here."""
    try:
        from models.layer_list import layer_macs  # Keras and TensorFlow: only for a report that has a study
        macs = layer_macs(model, dataset)
    except Exception:  # noqa: BLE001 - a report prints without the shares rather than not at all
        return {}
    total = sum(macs.values())
    return {name: value / total for name, value in macs.items()}


def studies(rows: Sequence[Row], shares: Callable[[str, str], Mapping[str, float]] = _shares) -> list[Study]:
    """Every study among `rows` (see the module's doc), in data set, model, multiplier and kind order."""
    uniform: dict[tuple, list[Row]] = defaultdict(list)
    cells: dict[tuple, dict[str, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        labels = layer_labels(row)
        if labels is None:
            continue
        base = (row.dataset, row.model, comparable(row.setting))
        distinct = set(labels.values())
        if len(distinct) == 1:
            uniform[(*base, distinct.pop())].append(row)
            continue
        approximated = [name for name, label in labels.items() if label != NATIVE]
        if len(approximated) == 1:
            cells[(*base, labels[approximated[0]], APPROXIMATE_ONE)][approximated[0]].append(row)
        kept = [name for name, label in labels.items() if label == NATIVE]
        others = {label for label in labels.values() if label != NATIVE}
        if len(kept) == 1 and len(others) == 1:
            cells[(*base, others.pop(), EXACT_ONE)][kept[0]].append(row)
    found = []
    for (dataset, model, setting, mult, kind), by_layer in cells.items():
        base = (dataset, model, setting)
        reference = tuple(uniform.get((*base, NATIVE if kind == APPROXIMATE_ONE else mult), ()))
        other_end = tuple(uniform.get((*base, mult if kind == APPROXIMATE_ONE else NATIVE), ()))
        share = shares(model, dataset)
        against = finished_by_seed(reference)
        layers = tuple(LayerResult(name, share.get(name), tuple(by_layer[name]),
                                   paired(finished_by_seed(by_layer[name]), against) if against else None)
                       for name in am_layer_names(model) if name in by_layer)
        found.append(Study(dataset, model, mult, kind, setting, reference, other_end, layers))
    return sorted(found, key=lambda s: (s.dataset, s.model, s.mult, KINDS.index(s.kind), s.setting))


def _accuracy_text(runs: Sequence[Row]) -> str:
    done = finished_accuracies(runs)
    if not done:
        return "-" if not runs else "not finished"
    return f"{statistics.fmean(done):.4f}" + (f" (n={len(done)})" if len(done) > 1 else "")


def _setting_text(setting: Sequence[tuple[str, str]], shown: set[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in setting if k in shown)


def _shown(found: Sequence[Study]) -> set[str]:
    """The setting keys in which studies of one model and multiplier differ (shown in their titles)."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for s in found:
        by[(s.dataset, s.model, s.mult, s.kind)].append(dict(s.setting))
    keys: set[str] = set()
    for settings in by.values():
        keys |= {k for k in set().union(*settings) if len({s.get(k) for s in settings}) > 1}
    return keys


def titles(found: Sequence[Study]) -> list[str]:
    """Each study's title, with the settings that tell apart studies of one model, multiplier and kind."""
    shown = _shown(found)
    return [s.title + (f" ({_setting_text(s.setting, shown)})" if _setting_text(s.setting, shown) else "")
            for s in found]


def markdown(found: Sequence[Study]) -> str:
    """A table per study: each layer's share of the MACs, accuracy and difference to the reference."""
    if not found:
        return ""
    out = ["## Layer sensitivity", ""]
    for study, title in zip(found, titles(found)):
        out += [f"### {title}", "",
                f"Reference ({study.reference_label} everywhere): {_accuracy_text(study.reference)}; "
                f"{study.other_label} everywhere: {_accuracy_text(study.other_end)}.", "",
                "| layer | MACs share | accuracy | difference to the reference | seeds |",
                "|---|---|---|---|---|"]
        for layer in study.layers:
            share = "-" if layer.share is None else f"{100 * layer.share:.2f} %"
            versus = points_text(layer.versus) if layer.versus else "-"
            seeds = ", ".join(layer.versus.seeds) if layer.versus else ""
            out.append(f"| {layer.layer} | {share} | {_accuracy_text(layer.runs)} | {versus} | {seeds} |")
        out.append("")
    return "\n".join(out).rstrip()


def _number(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else repr(value)


def to_csv(found: Sequence[Study]) -> str:
    """sensitivity.csv: one line per layer of each study."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["dataset", "model", "mult", "kind", "setting", "layer", "macs_share", "accuracy_mean", "n",
                     "reference_mean", "difference_mean", "difference_low", "difference_high", "pairs"])
    for s in found:
        reference = _mean(s.reference)
        for layer in s.layers:
            p = layer.versus
            writer.writerow([s.dataset, s.model, s.mult, s.kind, " ".join(f"{k}={v}" for k, v in s.setting),
                             layer.layer, _number(layer.share), _number(layer.accuracy),
                             len(finished_accuracies(layer.runs)), _number(reference),
                             _number(p.mean if p else None), _number(p.low if p else None),
                             _number(p.high if p else None), p.n if p else 0])
    return buffer.getvalue()
