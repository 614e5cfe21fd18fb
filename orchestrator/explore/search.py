"""A greedy search that runs as a grid: from a finished layer sensitivity study, the layers in the order of the
accuracy they cost per share of the network's multiply-accumulates, and one cell per prefix of that order.

    loss(L)  = accuracy lost by approximating L: minus L's difference to the all-native reference (approximate-one),
               or L's gain from being kept exact against the all-M reference (exact-one)
    score(L) = loss(L) / share(L), the accuracy paid per unit of multiplication saved (a layer's saving under M is
               share(L) x (1 - M's relative energy)); ascending, ties to the larger share, then layer order

Proposal k approximates the k first layers of the order under M and keeps the rest native: k = 1 .. N-1 (k = 0 and
k = N are the study's ends) but a k whose cell the study ran already (k = 1 of an approximate-one study: one layer
alone), or `--steps S` values of k spread evenly over that range. Its predicted relative
energy (or power) is 1 - sum of the k shares x (1 - M's figure), where M has one. The proposals are one launch.py
sweep (mult=native, mult.layers=choice(...)), so each is a cell with its identity, checkpoints and resume, and the
report's front (report.front) places them beside the study's cells.

The order is greedy: it assumes the layers' losses add up. The front shows where they do not; a finer search (a
second multiplier for the least sensitive layers, or Hydra's Optuna sweeper over mult.layers) starts from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from models.layer_names import am_layer_names
from ops.modes.multipliers import parse

from orchestrator.explore.grid import Study, StudyError, layers_choice, rule
from orchestrator.report import sensitivity as found
from orchestrator.report.table import Row

LUT_PREFIX = "lut:"


@dataclass(frozen=True)
class Ranked:
    layer: str
    share: float
    loss: float          # accuracy lost by approximating the layer alone, as a fraction (0.01 = 1 point)
    score: float         # loss per share


def label_of(spec: str, exact_gradients: bool) -> str:
    """The multiplier's label in a run's layer map (CellConfig.layer_params): a mode, or lut:<file name>."""
    label = LUT_PREFIX + spec.rsplit("/", 1)[-1] if spec.startswith(LUT_PREFIX) else spec
    return label + (found.GRADIENTS_SUFFIX if exact_gradients else "")


def _normal(value: str) -> str:
    """An override's value as a run's setting holds it (Python's str() of the composed value)."""
    return {"true": "True", "false": "False", "null": "None"}.get(value, value)


def choose(studies: Sequence[found.Study], study: Study, mult: str, dataset: str, kind: str) -> found.Study:
    """The one study of `studies` for the model, data set, multiplier and kind, whose setting agrees with every
    override given; StudyError saying what was found where it is not exactly one."""
    label = label_of(mult, study.exact_gradients)
    candidates = [s for s in studies if (s.model, s.dataset, s.mult, s.kind) == (study.model, dataset, label, kind)]
    given = {k: _normal(v) for k, v in study.values.items()}
    matching = [s for s in candidates if all(given[k] == v for k, v in s.setting if k in given)]
    if len(matching) == 1:
        return matching[0]
    have = "; ".join(f"{s.model} on {s.dataset} under {s.mult} ({s.kind})" for s in studies) or "none"
    if not matching:
        raise StudyError(f"no finished {kind} study of {study.model} on {dataset} under {label} with these overrides "
                         f"in the store (studies found: {have}); run `python -m orchestrator.explore sensitivity` "
                         "with the same overrides first")
    differing = sorted({k for s in matching for k, v in s.setting
                        if len({dict(t.setting).get(k) for t in matching}) > 1})
    raise StudyError(f"{len(matching)} studies of {study.model} on {dataset} under {label} differ in "
                     f"{', '.join(differing)}: give the one meant, e.g. {differing[0]}=VALUE")


def ranking(study: found.Study) -> list[Ranked]:
    """The study's layers, least accuracy lost per share first; StudyError naming the layers not yet finished."""
    missing = [layer.layer for layer in study.layers if layer.versus is None]
    if missing or not study.layers:
        raise StudyError(f"the study {study.title} has no finished pair with its reference for "
                         f"{', '.join(missing) or 'any layer'} (its reference {study.reference_label} everywhere must "
                         "be finished too); finish the sensitivity grid first (run it again: finished cells are "
                         "skipped)")
    unknown = [layer.layer for layer in study.layers if not layer.share]
    if unknown:
        raise StudyError(f"no multiply-accumulate share for {', '.join(unknown)} of {study.model}: the network could "
                         "not be built here")
    sign = -1.0 if study.kind == found.APPROXIMATE_ONE else 1.0
    ranked = [Ranked(layer.layer, float(layer.share), sign * layer.versus.mean,
                     sign * layer.versus.mean / float(layer.share)) for layer in study.layers]
    order = {layer.layer: i for i, layer in enumerate(study.layers)}
    return sorted(ranked, key=lambda r: (r.score, -r.share, order[r.layer]))


def prefix_lengths(layers: int, steps: int | None, skip: Sequence[int] = ()) -> list[int]:
    """The k of each proposal: 1 .. layers-1 but `skip`, or `steps` of them spread evenly (the first and last
    included)."""
    every = [k for k in range(1, layers) if k not in skip]
    if steps is None or steps >= len(every):
        return every
    if steps < 1:
        raise StudyError(f"--steps {steps}: give at least 1")
    if steps == 1:
        return [every[len(every) // 2]]
    return sorted({every[round(i * (len(every) - 1) / (steps - 1))] for i in range(steps)})


def relative_figure(mult: str) -> tuple[str, float] | None:
    """M's relative energy (else power) per multiply, with its kind; None where it has neither."""
    cost = parse(mult).cost
    if cost is None:
        return None
    for kind in ("energy", "power"):
        if getattr(cost, kind) is not None:
            return kind, float(getattr(cost, kind))
    return None


def proposals(ranked: Sequence[Ranked], lengths: Sequence[int]) -> list[list[str]]:
    return [[r.layer for r in ranked[:k]] for k in lengths]


def predicted(ranked: Sequence[Ranked], k: int, figure: float) -> float:
    """The network's relative multiplication figure with the first k layers under M (figure per multiply), the rest
    native."""
    return 1.0 - sum(r.share for r in ranked[:k]) * (1.0 - figure)


def overrides(study: Study, mult: str, chosen: Sequence[Sequence[str]]) -> list[str]:
    """launch.py's overrides: one cell per proposal, mult=native and M in the proposal's layers."""
    assignments = [[rule(list(layers), mult, study.exact_gradients)] for layers in chosen]
    return [f"model={study.model}", "mult=native", layers_choice(assignments), *study.overrides]


def table(ranked: Sequence[Ranked], lengths: Sequence[int], mult: str) -> str:
    """What the command prints: the order and the proposals with their predicted cost."""
    figure = relative_figure(mult)
    lines = ["| order | layer | MACs share | accuracy lost alone (points) | points lost / share of the MACs |",
             "|---|---|---|---|---|"]
    lines += [f"| {i} | {r.layer} | {100 * r.share:.2f} % | {100 * r.loss:+.2f} | {100 * r.score:+.3f} |"
              for i, r in enumerate(ranked, start=1)]
    lines += ["", "| proposal | layers under " + mult + " | MACs approximated | predicted relative "
              + (figure[0] if figure else "energy") + " |", "|---|---|---|---|"]
    for k in lengths:
        share = sum(r.share for r in ranked[:k])
        cost = f"{predicted(ranked, k, figure[1]):.4f}" if figure else f"- ({mult} has no published figure)"
        lines.append(f"| k={k} | {', '.join(r.layer for r in ranked[:k])} | {100 * share:.2f} % | {cost} |")
    return "\n".join(lines)


def run_already(study: found.Study, layers: int) -> list[int]:
    """The k whose proposal is a cell of the study itself: one layer approximated (k = 1, approximate-one), or all
    but one (k = layers - 1, exact-one over every layer of the network)."""
    if study.kind == found.APPROXIMATE_ONE:
        return [1]
    return [layers - 1] if layers == len(am_layer_names(study.model)) else []


def search_rows(rows: Sequence[Row], study: Study, dataset: str, kind: str, steps: int | None) \
        -> tuple[list[Ranked], list[int], list[str]]:
    """From a store's rows: the ranking, the proposals' k and the launch overrides, for the study's one multiplier."""
    if len(study.mults) != 1:
        raise StudyError(f"mult={','.join(study.mults)}: a search places one multiplier; run one search per "
                         "multiplier")
    mult = study.mults[0]
    chosen = choose(found.studies(rows), study, mult, dataset, kind)
    ranked = ranking(chosen)
    lengths = prefix_lengths(len(ranked), steps, run_already(chosen, len(ranked)))
    if not lengths:
        raise StudyError(f"the study covers {len(ranked)} layer(s): there is no mix between its ends that it has not "
                         "run already")
    return ranked, lengths, overrides(study, mult, proposals(ranked, lengths))
