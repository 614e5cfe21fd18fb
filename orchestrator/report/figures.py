"""The report's figures, drawn with matplotlib (Agg: files only, fine on a node without a display).

    heatmap(dataset, columns, body)          final test accuracy, model x multiplier, and the difference to the
                                             reference column (native, else acc32), one figure per data set
    grid_curves(dataset, curves)             test accuracy and training loss against epoch, a panel pair per
                                             model, one line per multiplier
    cell_curves(title, history)              one cell's accuracy (training and test) and loss against epoch

Every figure names its axes with units, and multipliers as users type them (the report's column labels).
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

REFERENCE_COLUMNS = ("native", "acc32")   # the first one a table has is what the differences are taken to
DPI = 120


def pyplot():
    import matplotlib  # only where a figure is drawn: the report's tables and the cell's import need none

    matplotlib.use("Agg")  # files only, no display: chosen before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def reference_column(columns: Sequence[str]) -> int | None:
    """The index of the column the differences are taken to (native, else acc32), or None without either."""
    for name in REFERENCE_COLUMNS:
        if name in columns:
            return list(columns).index(name)
    return None


def _annotation(value: float, spread: float, count: int, signed: bool) -> str:
    text = f"{value:+.1f}" if signed else f"{value:.1f}"
    return text if count < 2 else f"{text}\n± {spread:.1f} (n={count})"


def heatmap(dataset: str, columns: Sequence[str], rows: Sequence[str], means: np.ndarray, stds: np.ndarray,
            counts: np.ndarray, texts: Sequence[Sequence[str]]):
    """A figure of `means` ([rows, columns] final test accuracy as a fraction, NaN where no run has finished; the
    texts of those cells, running, failed, -, are written in them instead), with the seeds' standard deviation and
    count written in each cell that has several. With a native or acc32 column, a second panel shows each cell's
    difference to that column of its row, in percentage points."""
    plt = pyplot()
    reference = reference_column(columns)
    panels = 1 if reference is None else 2
    width = max(4.5, 1.3 * len(columns) + 2.5)
    height = max(2.8, 0.7 * len(rows) + 2.0)
    fig, axes = plt.subplots(1, panels, figsize=(width * panels, height), layout="constrained", squeeze=False)
    accuracy = 100 * np.asarray(means, dtype=float)
    spread = 100 * np.asarray(stds, dtype=float)
    finite = accuracy[np.isfinite(accuracy)]
    low = 10 * math.floor(finite.min() / 10) if finite.size else 0.0   # a scale in tens: small gaps look small
    data = [(accuracy, f"{dataset}: final test accuracy (%)", "accuracy (%)", "viridis", (low, 100.0), False)]
    if reference is not None:
        difference = accuracy - accuracy[:, [reference]]
        bound = float(np.nanmax(np.abs(difference))) if np.isfinite(difference).any() else 0.0
        bound = max(bound, 0.5)
        data.append((difference, f"{dataset}: difference to {columns[reference]} of the same model",
                     "percentage points", "RdBu", (-bound, bound), True))
    for ax, (values, title, unit, cmap_name, (vmin, vmax), signed) in zip(axes[0], data):
        cmap = plt.get_cmap(cmap_name).with_extremes(bad="lightgrey")   # unfinished cells: grey, state written in
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, aspect="auto", vmin=vmin, vmax=vmax)
        fig.colorbar(image, ax=ax, label=unit)
        ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right")
        ax.set_yticks(range(len(rows)), rows)
        ax.set_xlabel("multiplier (mult=)")
        ax.set_ylabel("model (model=)")
        ax.set_title(title)
        for i in range(len(rows)):
            for j in range(len(columns)):
                value = values[i, j]
                if not math.isfinite(value):
                    ax.text(j, i, texts[i][j], ha="center", va="center", fontsize=9, style="italic")
                    continue
                shade = float(image.norm(value))      # dark ends of the colour map get white text
                dark = shade < 0.45 if not signed else abs(shade - 0.5) > 0.3
                ax.text(j, i, _annotation(value, spread[i, j], int(counts[i, j]), signed), ha="center",
                        va="center", fontsize=9, color="white" if dark else "black")
    return fig


def _epoch_axis(ax) -> None:
    from matplotlib.ticker import MaxNLocator  # matplotlib only where a figure is drawn (pyplot)

    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def grid_curves(dataset: str, curves: Mapping[str, Mapping[str, Sequence[tuple[float, float, float]]]]):
    """curves: {model: {multiplier label: [(epoch, test accuracy, training loss), ...]}} (seeds averaged).
    A row of two panels per model: test accuracy (%) and training loss against epoch, one line per multiplier."""
    plt = pyplot()
    models = list(curves)
    fig, axes = plt.subplots(max(len(models), 1), 2, figsize=(11, 3.2 * max(len(models), 1)),
                             layout="constrained", squeeze=False)
    for (acc_ax, loss_ax), model in zip(axes, models):
        for label, points in curves[model].items():
            if not points:
                continue
            epochs, accuracy, loss = zip(*points)
            acc_ax.plot(epochs, [100 * a for a in accuracy], marker="o", markersize=3, label=label)
            loss_ax.plot(epochs, loss, marker="o", markersize=3, label=label)
        acc_ax.set_title(f"{model} on {dataset}: test accuracy")
        acc_ax.set_ylabel("test accuracy (%)")
        loss_ax.set_title(f"{model} on {dataset}: training loss")
        loss_ax.set_ylabel("training loss (cross-entropy)")
        for ax in (acc_ax, loss_ax):
            _epoch_axis(ax)
        acc_ax.legend(title="multiplier (mean of seeds)", fontsize=8)
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
