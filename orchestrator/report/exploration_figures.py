"""The design-space figures (matplotlib, through report.figures' Agg backend):

    front(dataset, found, colours)    accuracy against relative multiplication cost, a panel per model: every cell a
                                      point in its multiplier's colour, the Pareto-optimal ones ringed, joined by the
                                      front's steps and numbered as the front's table lists them
    sensitivity(study, title)         a study's layers: the accuracy difference to its reference (points, with the
                                      95 % interval where there are several seeds) beside each layer's share of the
                                      network's multiply-accumulates
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

from orchestrator.report.figures import pyplot
from orchestrator.report.front import Front, axis_label
from orchestrator.report.sensitivity import APPROXIMATE_ONE, Study

GREY = (0.5, 0.5, 0.5)


def front(dataset: str, found: Sequence[Front], colours_of: Mapping[str, Sequence[float]]):
    plt = pyplot()
    fig, axes = plt.subplots(1, max(len(found), 1), figsize=(6.2 * max(len(found), 1), 4.6), layout="constrained",
                             squeeze=False)
    for ax, panel in zip(axes[0], found):
        for p in panel.points:
            ax.scatter(p.cost, 100 * p.accuracy, s=46 if p.optimal else 22, color=colours_of.get(p.mult, GREY),
                       edgecolors="black" if p.optimal else "none", linewidths=1.2, zorder=3)
        best = sorted(panel.optimal, key=lambda p: p.cost)
        if best:
            xs, ys = [p.cost for p in best], [100 * p.accuracy for p in best]
            ax.step(xs, ys, where="post", color="black", linewidth=0.8, alpha=0.6, zorder=2,
                    label=f"Pareto front ({len(best)} of {len(panel.points)} cells)")
            for number, p in enumerate(best, start=1):  # the number of the front's table (report.front)
                ax.annotate(str(number), (p.cost, 100 * p.accuracy), fontsize=7, xytext=(4, 3),
                            textcoords="offset points")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xlabel(axis_label(panel.figure))
        ax.set_ylabel("final test accuracy (%)")
        ax.set_title(f"{panel.model} on {dataset}")
        ax.grid(alpha=0.3)
    return fig


def sensitivity(study: Study, title: str):
    plt = pyplot()
    layers = study.layers
    height = max(2.4, 0.28 * len(layers) + 1.2)
    fig, (diff_ax, share_ax) = plt.subplots(1, 2, figsize=(10, height), layout="constrained", sharey=True,
                                            gridspec_kw={"width_ratios": [2, 1]})
    ys = list(range(len(layers)))
    means = [100 * l.versus.mean if l.versus else math.nan for l in layers]
    errors = [[100 * (l.versus.mean - l.versus.low) if l.versus and math.isfinite(l.versus.low) else 0
               for l in layers],
              [100 * (l.versus.high - l.versus.mean) if l.versus and math.isfinite(l.versus.high) else 0
               for l in layers]]
    colours = ["tab:red" if m < 0 else "tab:blue" for m in means]
    diff_ax.barh(ys, [0 if math.isnan(m) else m for m in means], xerr=errors, color=colours, capsize=2)
    for y, m in zip(ys, means):
        if math.isnan(m):
            diff_ax.annotate("no finished pair", (0, y), fontsize=6, va="center", xytext=(3, 0),
                             textcoords="offset points", color=GREY)
    diff_ax.axvline(0, color="black", linewidth=0.8)
    what = (f"accuracy change, {study.mult} in this layer only (points)" if study.kind == APPROXIMATE_ONE
            else "accuracy change, this layer kept native (points)")
    diff_ax.set_xlabel(f"{what}\nagainst {study.reference_label} everywhere")
    diff_ax.set_yticks(ys, [l.layer for l in layers], fontsize=7)
    diff_ax.invert_yaxis()
    diff_ax.grid(axis="x", alpha=0.3)
    share_ax.barh(ys, [100 * (l.share or 0) for l in layers], color=GREY)
    share_ax.set_xlabel("share of the MACs (%)")
    share_ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    return fig
