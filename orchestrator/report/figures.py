"""The report's figures, drawn with matplotlib (Agg: files only, fine on a node without a display).

    heatmap(dataset, columns, ...)           final test accuracy, model x multiplier, and each cell's paired
                                             difference to its baseline of the same setting (report.comparisons),
                                             one figure per data set
    grid_curves(dataset, curves, colours)    test accuracy and training loss against epoch, a panel pair per
                                             model: per table column the seeds' mean with a ±1 standard deviation
                                             band, and each unfinished seed dashed, its state in the legend
    colours(multipliers)                     one colour per multiplier, the same in every panel and file; the
                                             columns of one multiplier (other settings) differ by their markers
    cell_curves(title, history)              one cell's accuracy (training and test) and loss against epoch

Every figure names its axes with units, and multipliers as users type them (the report's column labels).
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

DPI = 120
PALETTE = "tab10"      # ten colours that print apart; beyond ten multipliers, tab20's lighter shades follow
MARKERS = "osD^vP*X"   # the columns of one multiplier in a panel (its settings), in the table's order


def pyplot():
    import matplotlib  # only where a figure is drawn: the report's tables and the cell's import need none

    matplotlib.use("Agg")  # files only, no display: chosen before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def colours(multipliers: Sequence[str]) -> dict[str, tuple]:
    """A colour per multiplier label, in their order: the report gives every multiplier its colour once
    (table.multipliers: the registered ones first), so a multiplier reads the same in each panel and file."""
    from matplotlib import colormaps  # colour maps without pyplot

    first, more = colormaps[PALETTE].colors, colormaps["tab20"].colors[1::2]
    palette = list(first) + list(more)
    out: dict[str, tuple] = {}
    for label in multipliers:
        out.setdefault(label, palette[len(out) % len(palette)])
    return out


def _annotation(value: float, spread: float, count: int) -> str:
    return f"{value:.1f}" if count < 2 else f"{value:.1f}\n± {spread:.1f} (n={count})"


def _panel(fig, ax, values, texts, title, unit, cmap_name, limits, columns, rows, signed):
    """One heatmap panel of `values` ([rows, columns], NaN drawn grey) with `texts` written in its cells."""
    plt = pyplot()
    cmap = plt.get_cmap(cmap_name).with_extremes(bad="lightgrey")   # cells without a number: grey, reason written
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, aspect="auto", vmin=limits[0], vmax=limits[1])
    fig.colorbar(image, ax=ax, label=unit)
    ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("multiplier (mult=) and setting")
    ax.set_ylabel("model (model=)")
    ax.set_title(title)
    for i in range(len(rows)):
        for j in range(len(columns)):
            value = values[i, j]
            if not math.isfinite(value):
                ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=8, style="italic")
                continue
            shade = float(image.norm(value))      # dark ends of the colour map get white text
            dark = shade < 0.45 if not signed else abs(shade - 0.5) > 0.3
            ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=8, color="white" if dark else "black")


def heatmap(dataset: str, columns: Sequence[str], rows: Sequence[str], means: np.ndarray, stds: np.ndarray,
            counts: np.ndarray, texts: Sequence[Sequence[str]], differences: np.ndarray | None = None,
            difference_texts: Sequence[Sequence[str]] = ()):
    """A figure of `means` ([rows, columns] final test accuracy as a fraction, NaN where no run has finished; the
    texts of those cells, running, failed, not started or blank, are written in them instead), with the seeds'
    standard deviation and count written in each cell that has several. With `differences` ([rows, columns], in
    fractions, NaN where a cell has no baseline of its setting or no seed finished by both), a second panel shows
    them in percentage points, each cell's `difference_texts` written in it; its colour scale spans those
    differences alone."""
    plt = pyplot()
    panels = 1 if differences is None else 2
    width = max(4.5, 1.4 * len(columns) + 2.5)
    height = max(2.8, 0.8 * len(rows) + 2.2)
    fig, axes = plt.subplots(1, panels, figsize=(width * panels, height), layout="constrained", squeeze=False)
    accuracy = 100 * np.asarray(means, dtype=float)
    spread = 100 * np.asarray(stds, dtype=float)
    finite = accuracy[np.isfinite(accuracy)]
    low = 10 * math.floor(finite.min() / 10) if finite.size else 0.0   # a scale in tens: small gaps look small
    notes = [[_annotation(accuracy[i, j], spread[i, j], int(counts[i, j])) if math.isfinite(accuracy[i, j])
              else texts[i][j] for j in range(len(columns))] for i in range(len(rows))]
    _panel(fig, axes[0][0], accuracy, notes, f"{dataset}: final test accuracy (%)", "accuracy (%)", "viridis",
           (low, 100.0), columns, rows, False)
    if differences is not None:
        points = 100 * np.asarray(differences, dtype=float)
        bound = max(float(np.nanmax(np.abs(points))) if np.isfinite(points).any() else 0.0, 0.5)
        title = (f"{dataset}: difference to the baseline of the same setting\n"
                 "(mean over shared seeds [95 % interval] (n))")
        _panel(fig, axes[0][1], points, difference_texts, title, "percentage points", "RdBu", (-bound, bound),
               columns, rows, True)
    return fig


def _epoch_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator  # matplotlib only where a figure is drawn (pyplot)

    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _band(ax, epochs, mean, std, colour) -> None:
    low, high = np.asarray(mean) - np.asarray(std), np.asarray(mean) + np.asarray(std)
    if np.isfinite(low).any():
        ax.fill_between(epochs, low, high, color=colour, alpha=0.2, linewidth=0)


def grid_curves(dataset: str, curves: Mapping[str, Mapping[str, object]], colours_of: Mapping[str, tuple]):
    """curves: {model: {column label: histories.CellCurves}}. A row of two panels per model: test accuracy (%) and
    training loss against epoch; per column, the finished seeds' mean (solid, with a ±1 standard deviation band
    where there are several) and each unfinished seed's partial curve (dashed, its state in the legend), all in
    the colour of the column's multiplier from `colours_of`, in a marker of its own where the multiplier has
    several columns (settings) in the panel."""
    plt = pyplot()
    models = list(curves)
    fig, axes = plt.subplots(max(len(models), 1), 2, figsize=(11, 3.4 * max(len(models), 1)),
                             layout="constrained", squeeze=False)
    for (acc_ax, loss_ax), model in zip(axes, models):
        settings_of: dict[str, int] = {}
        for label, cell in curves[model].items():
            colour = colours_of[cell.mult]
            marker = MARKERS[settings_of.setdefault(cell.mult, 0) % len(MARKERS)]
            settings_of[cell.mult] += 1
            if cell.mean:
                epochs, accuracy, loss, acc_std, loss_std, count = zip(*cell.mean)
                seeds = f"{label} (mean of {count[0]} seeds ± std)" if count[0] > 1 else label
                acc_ax.plot(epochs, [100 * a for a in accuracy], marker=marker, markersize=3, color=colour,
                            label=seeds)
                loss_ax.plot(epochs, loss, marker=marker, markersize=3, color=colour, label=seeds)
                _band(acc_ax, epochs, [100 * a for a in accuracy], [100 * s for s in acc_std], colour)
                _band(loss_ax, epochs, loss, loss_std, colour)
            for seed, status, points in cell.partial:
                epochs, accuracy, loss = zip(*points)
                text = f"{label} seed {seed} ({status.lower()}, partial)"
                acc_ax.plot(epochs, [100 * a for a in accuracy], linestyle="--", marker=marker, markersize=3,
                            fillstyle="none", color=colour, label=text)
                loss_ax.plot(epochs, loss, linestyle="--", marker=marker, markersize=3, fillstyle="none",
                             color=colour, label=text)
        acc_ax.set_title(f"{model} on {dataset}: test accuracy")
        acc_ax.set_ylabel("test accuracy (%)")
        loss_ax.set_title(f"{model} on {dataset}: training loss")
        loss_ax.set_ylabel("training loss (cross-entropy)")
        for ax in (acc_ax, loss_ax):
            _epoch_axis(ax)
        acc_ax.legend(title="multiplier and setting", fontsize=7)
    return fig


def cell_curves(title: str, history: Sequence[Mapping[str, float]]):
    """One cell's curves from its per-epoch metrics (epoch, loss, accuracy, test_accuracy)."""
    plt = pyplot()
    fig, (acc_ax, loss_ax) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    epochs = [h["epoch"] for h in history]
    acc_ax.plot(epochs, [100 * h["accuracy"] for h in history], marker="o", markersize=3, label="training")
    acc_ax.plot(epochs, [100 * h["test_accuracy"] for h in history], marker="o", markersize=3, label="test")
    acc_ax.set_ylabel("accuracy (%)")
    acc_ax.legend()
    loss_ax.plot(epochs, [h["loss"] for h in history], marker="o", markersize=3, color="tab:red")
    loss_ax.set_ylabel("training loss (cross-entropy)")
    for ax in (acc_ax, loss_ax):
        _epoch_axis(ax)
    fig.suptitle(title)
    return fig


def save(fig, path) -> None:
    """Write the figure as PNG and free it (a report draws many)."""
    fig.savefig(path, dpi=DPI)
    pyplot().close(fig)
