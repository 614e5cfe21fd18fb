"""What a multiplier does to one product: its error statistics, printed, and its error map (or histogram) saved.

    python -m ops.describe am16                      any mode of ops.names() but native
    python -m ops.describe lut:tests/data/approxtrain-luts/MBM_7.bin --out figures/

Prints mean |rel. error|, bias and max |rel. error| of OPERANDS standard normal pairs (the numbers of
docs/multipliers.md: both come from ops.modes.error_stats), the percentiles of |rel. error|, and for modes of at most
MAP_MAX_BITS mantissa bits the same statistics over every (Fa, Fb) mantissa pair. Saves into --out (default:
reports/multipliers, beside the experiments' reports) <name>-error-map.png (a map of the relative error over (Fa, Fb)
for those modes, a histogram of the sampled errors for the others), <name>-errors.npz (the data the figure draws)
and <name>-summary.json. Training cells log the same files with their MLflow run. Needs matplotlib for the figure only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from ops.modes import error_stats
from ops.modes.circuit_errors import circuit_errors, exact_products
from ops.modes.integer_reference import integer_mode
from ops.modes.multipliers import LUT_PATTERN, names, parse

DEFAULT_OUT = "reports/multipliers"   # never the current folder: run from a clone's root, that would be the repository's
STATS = (("mean", "mean |rel. error|"), ("bias", "bias (mean rel. error)"), ("max", "max |rel. error|"))


def file_stem(multiplier: str) -> str:
    """A file name for a mode as users type it: am16 -> am16, lut:/x/MBM_7.bin -> lut-MBM_7.bin."""
    mode = parse(multiplier)
    prefix = mode.name.partition(":")[0] if mode.is_integer else "lut"
    name = f"{prefix}-{mode.path.name}" if mode.path is not None else mode.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _percent(fraction: float) -> str:
    return f"{100 * fraction:+.4g} %" if fraction < 0 else f"{100 * fraction:.4g} %"


def integer_summary(multiplier: str) -> tuple[dict, np.ndarray]:
    """An integer mode's summary (its table's relative error over every pair of codes whose exact product is not 0:
    mean, bias, max; and EvoApproxLib's figures of the circuit) and the (256, 256) relative error map (NaN where the
    exact product is 0), indexed by the codes' bytes [a, w]."""
    mode = integer_mode(parse(multiplier).name)
    exact = exact_products(mode.kind).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(exact != 0, (mode.table.astype(np.float64) - exact) / np.abs(exact), np.nan)
    valid = relative[~np.isnan(relative)]
    summary = {"mode": mode.name, "family": "integer", "kind": mode.kind, "scheme": mode.scheme,
               "products": int(valid.size), "mean": float(np.abs(valid).mean()), "bias": float(valid.mean()),
               "max": float(np.abs(valid).max()), "circuit": circuit_errors(mode.table, mode.kind)}
    return summary, relative


def text(summary: dict) -> str:
    """The summary as lines a user reads."""
    if summary["family"] == "integer":
        lines = [f"{summary['mode']}: integer multiplier on {summary['scheme']} {summary['kind']} 8-bit codes",
                 f"every pair of codes with a nonzero exact product ({summary['products']:,}), relative error = "
                 f"(table - exact) / |exact|:"]
        lines += [f"  {label:<24} {_percent(summary[key])}" for key, label in STATS]
        lines.append("  EvoApproxLib's figures: " + ", ".join(f"{key} {value:.4g}"
                                                              for key, value in summary["circuit"].items()))
        return "\n".join(lines)
    bits = summary["mantissa_bits"]
    lines = [f"{summary['mode']}: {summary['family']} multiplier, {bits} mantissa bits",
             f"single products of {summary['operands']:,} standard normal fp32 pairs (seed {summary['seed']}), "
             f"relative error = (approximate - exact) / exact:"]
    lines += [f"  {label:<24} {_percent(summary[key])}" for key, label in STATS]
    lines.append("  |rel. error| percentiles  " + ", ".join(
        f"p{p} {_percent(summary[f'p{p}'])}" for p in error_stats.PERCENTILES))
    if "grid_mean" in summary:
        side = 1 << bits
        lines.append(f"every mantissa pair (Fa, Fb), {side} x {side} products 1.Fa x 1.Fb:")
        lines += [f"  {label:<24} {_percent(summary['grid_' + key])}" for key, label in STATS]
    return "\n".join(lines)


def figure(multiplier: str, data: dict):
    """The error map (imshow of data["relative_error"], in %) or the histogram (data["counts"], data["edges"])."""
    import matplotlib  # only where a figure is drawn: the statistics and `import ops` need none

    matplotlib.use("Agg")  # files only: no display on a compute node
    import matplotlib.pyplot as plt

    name, _, path = multiplier.partition(":")
    label = f"{name}:{Path(path).name}" if path else parse(multiplier).name
    fig, ax = plt.subplots(figsize=(6.4, 5.2), layout="constrained")
    if "integer_error" in data:
        percent = 100 * data["integer_error"]
        bound = float(np.nanmax(np.abs(percent))) or 1e-9
        image = ax.imshow(percent, origin="lower", cmap="RdBu_r", vmin=-bound, vmax=bound, interpolation="nearest")
        fig.colorbar(image, ax=ax, label="relative error (%)")
        ax.set_xlabel("w: the weight's code byte (0..255; a signed code by its two's complement)")
        ax.set_ylabel("a: the activation's code byte")
        ax.set_title(f"{label}: relative error of T[a, w]\nmean |err| {np.nanmean(np.abs(percent)):.3g} %, "
                     f"max |err| {np.nanmax(np.abs(percent)):.3g} %")
    elif "relative_error" in data:
        percent = 100 * data["relative_error"]
        bound = float(np.abs(percent).max()) or 1e-9
        image = ax.imshow(percent, origin="lower", cmap="RdBu_r", vmin=-bound, vmax=bound, interpolation="nearest")
        fig.colorbar(image, ax=ax, label="relative error (%)")
        side = percent.shape[0]
        ax.set_xlabel(f"Fb: mantissa field of b (0..{side - 1}, b = 1 + Fb/{side})")
        ax.set_ylabel(f"Fa: mantissa field of a (0..{side - 1}, a = 1 + Fa/{side})")
        ax.set_title(f"{label}: relative error of 1.Fa x 1.Fb\nmean |err| {np.abs(percent).mean():.3g} %, "
                     f"bias {percent.mean():+.3g} %, max |err| {np.abs(percent).max():.3g} %")
    else:
        counts, edges = data["counts"], data["edges"]
        share = 100 * counts / counts.sum()
        ax.bar(100 * edges[:-1], share, width=100 * np.diff(edges), align="edge", color="tab:blue")
        ax.set_yscale("log")
        ax.set_xlabel("relative error of one product (%)")
        ax.set_ylabel("share of products (%, log scale)")
        ax.set_title(f"{label}: error of {int(counts.sum()):,} products of standard normal pairs")
    return fig


def write(multiplier: str, out_dir: str | Path) -> dict:
    """Compute the summary, save the figure, its data and the summary under out_dir; return the summary, with the
    paths written under "files"."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if parse(multiplier).is_integer:
        summary, relative = integer_summary(multiplier)
        data = {"integer_error": relative}
    elif error_stats.has_map(multiplier):
        summary = error_stats.summary(multiplier)
        data = {"relative_error": error_stats.error_map(multiplier)}
    else:
        summary = error_stats.summary(multiplier)
        counts, edges = error_stats.histogram(error_stats.relative_errors(multiplier))
        data = {"counts": counts, "edges": edges}
    stem = file_stem(multiplier)
    paths = {"figure": out_dir / f"{stem}-error-map.png", "data": out_dir / f"{stem}-errors.npz",
             "summary": out_dir / f"{stem}-summary.json"}
    np.savez(paths["data"], **data)
    paths["summary"].write_text(json.dumps(summary, indent=1) + "\n")
    fig = figure(multiplier, data)
    fig.savefig(paths["figure"], dpi=120)
    import matplotlib.pyplot as plt  # loaded by figure(), after its backend was chosen

    plt.close(fig)
    return {**summary, "files": {key: str(path) for key, path in paths.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.describe", description=__doc__.splitlines()[0])
    parser.add_argument("multiplier", help=f"{', '.join(names(include_native=False))}, or {LUT_PATTERN}")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"folder for the figure, its data and the summary "
                        f"(default: {DEFAULT_OUT}, under the current folder)")
    args = parser.parse_args(argv)
    try:
        mode = parse(args.multiplier)
    except ValueError as e:
        parser.error(str(e))
    if mode.is_native:
        parser.error("'native' is the framework's own multiply, exact fp32: nothing to describe "
                     f"(acc32 is the same product inside the custom op); choose one of "
                     f"{', '.join(names(include_native=False))}, or {LUT_PATTERN}")
    result = write(args.multiplier, args.out)
    print(text(result))
    print("saved " + ", ".join(result["files"].values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
