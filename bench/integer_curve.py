"""The integer modes' accuracy against each circuit's error and power, from the runs of an MLflow store.

    python -m bench.integer_curve --tracking-uri sqlite:///mlflow.db [--experiment amdnn] [--out docs/integer]
                                  [--tables ops/luts/evoapprox]

Takes every finished cell whose multiplier is an integer mode (int8, uint8, ... with or without a table) and the
native cells of the same model and data set, and writes, per (model, data set): a markdown table (circuit, its mean
relative error over every pair of codes and EvoApproxLib's MAE% / WCE%, its power relative to the exact 8-bit
circuit, the accuracy and its difference to native and to the exact 8-bit cell) and integer-<model>-<dataset>.png,
accuracy against mean relative error with the power beside each point. Prints the tables.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

from ops.modes.describe import integer_summary
from ops.modes.multipliers import integer_names, parse
from orchestrator.report.table import collect, finished_accuracies


def _circuit(label: str, tables: Path) -> dict:
    """The figures of one integer cell's multiplier (its label: the mode, and the table file's name, found in
    `tables`): error and power."""
    name, _, file_name = label.partition(":")
    spec = f"{name}:{tables / file_name}" if file_name else name
    summary, _ = integer_summary(spec)
    cost = parse(spec).cost
    return {"label": label, "mre": summary["mean"], "mae%": summary["circuit"]["mae%"],
            "wce%": summary["circuit"]["wce%"], "power": cost.power if cost else None}


def curves(uri: str, experiment: str, tables: Path) -> dict[tuple[str, str], dict]:
    """(model, dataset) -> {"native": accuracy or None, "points": [circuit figures + accuracy, by error]}."""
    by_cell = defaultdict(list)
    for row in collect(uri, experiment):
        by_cell[(row.model, row.dataset, row.mult)].append(row)
    out: dict[tuple[str, str], dict] = {}
    for (model, dataset, label), rows in sorted(by_cell.items()):
        done = finished_accuracies(rows)
        if "[" in label or not (done or any(row.status == "FAILED" for row in rows)):  # a mix, or still running
            continue
        entry = out.setdefault((model, dataset), {"native": None, "points": []})
        if label == "native" and done:
            entry["native"] = statistics.fmean(done)
        elif label.partition(":")[0] in integer_names():  # a cell that failed to train has accuracy None
            accuracy = statistics.fmean(done) if done else None
            entry["points"].append({**_circuit(label, tables), "accuracy": accuracy, "seeds": len(done)})
    for entry in out.values():
        entry["points"].sort(key=lambda point: point["mre"])
    return {key: entry for key, entry in out.items() if entry["points"]}


def markdown(model: str, dataset: str, entry: dict) -> str:
    native = entry["native"]
    exact = {p["label"]: p["accuracy"] for p in entry["points"] if p["mre"] == 0}  # each mode's exact cell
    lines = [f"{model} on {dataset}" + (f" (native fp32: {native:.4f})" if native is not None else ""), "",
             "| multiplier | mean \\|rel. error\\| | MAE% | WCE% | power | accuracy | vs native | vs exact 8-bit | seeds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in entry["points"]:
        versus = lambda ref: f"{100 * (p['accuracy'] - ref):+.2f}" \
            if ref is not None and p["accuracy"] is not None else "-"  # noqa: E731
        power = f"{p['power']:.4g}" if p["power"] is not None else "-"
        accuracy = f"{p['accuracy']:.4f}" if p["accuracy"] is not None else "failed: did not train"
        lines.append(f"| {p['label']} | {100 * p['mre']:.3g} % | {p['mae%']:.3g} | {p['wce%']:.3g} | {power} | "
                     f"{accuracy} | {versus(native)} | {versus(exact.get(p['label'].partition(':')[0]))} | "
                     f"{p['seeds']} |")
    return "\n".join(lines)


def figure(model: str, dataset: str, entry: dict, path: Path) -> None:
    import matplotlib  # only where a figure is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.2, 4.8), layout="constrained")
    for mode, color in zip(integer_names(), ("tab:blue", "tab:green", "tab:orange", "tab:purple")):
        points = [p for p in entry["points"] if p["label"].partition(":")[0] == mode and p["accuracy"] is not None]
        if not points:
            continue
        x = [max(100 * p["mre"], 1e-2) for p in points]  # the exact circuit at the axis' left end (log scale)
        ax.plot(x, [p["accuracy"] for p in points], "o-", color=color, label=f"{mode} circuits")
        for xi, p in zip(x, points):
            text = p["label"].partition(":")[2].split(".")[0] or "exact"
            power = f", power {p['power']:.3g}" if p["power"] is not None else ""
            ax.annotate(f"{text}{power}", (xi, p["accuracy"]), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
    failed = [p["label"].partition(":")[2].split(".")[0] for p in entry["points"] if p["accuracy"] is None]
    if failed:
        ax.text(0.99, 0.02, "did not train: " + ", ".join(failed), transform=ax.transAxes, ha="right", fontsize=8)
    if entry["native"] is not None:
        ax.axhline(entry["native"], color="gray", linestyle="--", label="native fp32")
    ax.set_xscale("log")
    ax.set_xlabel("the circuit's mean relative error over every pair of codes (%; exact at the left)")
    ax.set_ylabel("final test accuracy")
    ax.set_title(f"{model} on {dataset}: integer modes")
    ax.legend(loc="lower left")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", required=True)
    parser.add_argument("--experiment", default="amdnn")
    parser.add_argument("--out", default="reports/integer")
    parser.add_argument("--tables", default="ops/luts/evoapprox", help="the folder of the cells' table files")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for (model, dataset), entry in curves(args.tracking_uri, args.experiment, Path(args.tables)).items():
        print(markdown(model, dataset, entry), "\n", flush=True)
        figure(model, dataset, entry, out / f"integer-{model}-{dataset}.png")


if __name__ == "__main__":
    main()
