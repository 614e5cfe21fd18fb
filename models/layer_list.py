"""A network's multiplying layers: names, groups, shapes, multiply-accumulates per image, each layer's multiplier and
the network's relative multiplication energy; what a user reads to write per-layer rules (models.layer_rules).

    python -m models.layer_list MODEL [--dataset digits] [--mult am16] [--keep first_last]
                                      [--rule stage4=mit16 --rule 'fc*=lut:MBM_7.bin' ...] [--csv FILE]

One line per Conv2D/Dense layer, in order: its name, kind, the groups a rule can name it by (first, last, stage2,
stage2_block1), input, kernel and output shapes of one image, its multiply-accumulates per image (MACs) and their share
of the network's, the multiplier it gets under the rules given, and that multiplier's energy per multiply relative to
the exact multiplier of its width (ops.modes.costs). The last line gives the network's relative multiplication
energy: sum over layers of MACs x relative energy, over the network's MACs (absent where a layer's multiplier has no
figure). A training cell logs the same table for its own rules (orchestrator.cell.artifacts, layers/).
"""

import argparse
import csv
import io
import os
import sys

import numpy as np

if __name__ == "__main__":  # the command: on a machine without a GPU driver, TensorFlow's CUDA probe is only noise
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from models.cuda_probe import quiet_probe_for_this_command
    quiet_probe_for_this_command()

from ops.modes.multipliers import NATIVE, parse  # noqa: E402

from models.datasets import DATASETS  # noqa: E402
from models.layer_names import am_layer_names  # noqa: E402
from models.layer_rules import EXACT, RuleError, Setting, groups, resolve, selector_matches, setting  # noqa: E402
from models.registry import MODELS, build_model  # noqa: E402

COLUMNS = ("layer", "kind", "groups", "input", "kernel", "output", "macs_per_image", "macs_share", "multiplier",
           "exact_gradients", "relative_energy", "relative_power")
HEAD = ("layer", "kind", "rules that pick it", "input", "kernel", "output", "MACs / image", "share",
        "multiplier", "exact gradients", "relative energy", "relative power")


def multiply_accumulates(kernel_shape, output_shape) -> int:
    """Multiply-accumulates making `output_shape`: every output element sums kernel-size x input-channel products
    (HWI of an HWIO kernel, the input width of a Dense kernel [in, out])."""
    return int(np.prod(output_shape)) * int(np.prod(tuple(kernel_shape)[:-1]))


def relative_figure(mult: str, figure: str) -> float | None:
    """The multiplier's `figure` (energy, power: ops.modes.costs.FIGURES) relative to the exact one of its width;
    None where none is published."""
    cost = parse(mult).cost
    return None if cost is None else getattr(cost, figure)


def relative_energy(mult: str) -> float | None:
    """The multiplier's energy per multiply relative to the exact one of its width; None where none is published."""
    return relative_figure(mult, "energy")


def network_figure(rows, key: str) -> float | None:
    """Sum over layers of MACs x the layer's `key` (relative_energy, relative_power), over the network's MACs; None
    where a layer's figure is missing."""
    if not rows or any(r[key] is None for r in rows):
        return None
    return sum(r["macs_per_image"] * r[key] for r in rows) / sum(r["macs_per_image"] for r in rows)


def network_energy(rows) -> float | None:
    """Sum over layers of MACs x relative energy, over the network's MACs; None where a layer's figure is missing."""
    return network_figure(rows, "relative_energy")


def network_power(rows) -> float | None:
    """Sum over layers of MACs x relative power, over the network's MACs: the mean power of the multipliers doing the
    network's multiplies at one rate, relative to exact ones (at equal rates, energy per multiply scales as power);
    None where a layer's figure is missing."""
    return network_figure(rows, "relative_power")


def layer_macs(model_name: str, dataset: str) -> dict[str, int]:
    """{layer: multiply-accumulates per image} of the network on the data set's inputs, in layer order (the network
    is built with Keras' own layers: shapes only, no op is built)."""
    spec = DATASETS[dataset]
    model = build_model(model_name, NATIVE, spec.input_shape, spec.num_classes)
    names = am_layer_names(model_name)
    return {row["layer"]: row["macs_per_image"] for row in layer_rows(model_name, model, dict.fromkeys(names, EXACT))}


def _shape(shape) -> str:
    return "x".join(str(int(d)) for d in tuple(shape)[1:])  # without the batch axis


def layer_rows(model_name: str, model, settings: dict[str, Setting]) -> list[dict]:
    """One dict (COLUMNS) per multiplying layer of `model` (built from `model_name`), each under settings[name]."""
    import keras  # here, not at the top: `--help` loads no Keras or TensorFlow

    names = am_layer_names(model_name)
    picks = {name: [] for name in names}
    for selector in ("first", "last", *groups(names)):
        for name in selector_matches(selector, names):
            picks[name].append(selector)
    built = {layer.name: layer for layer in model.layers if isinstance(layer, (keras.layers.Conv2D, keras.layers.Dense))}
    rows = []
    for name in names:
        layer, chosen = built[name], settings[name]
        macs = multiply_accumulates(layer.kernel.shape, layer.output.shape[1:])
        rows.append({"layer": name, "kind": "conv" if isinstance(layer, keras.layers.Conv2D) else "dense",
                     "groups": ",".join(picks[name]), "input": _shape(layer.input.shape),
                     "kernel": "x".join(map(str, layer.kernel.shape)), "output": _shape(layer.output.shape),
                     "macs_per_image": macs, "multiplier": chosen.label,
                     "exact_gradients": chosen.exact_gradients, "relative_energy": relative_energy(chosen.spec),
                     "relative_power": relative_figure(chosen.spec, "power")})
    total = sum(r["macs_per_image"] for r in rows)
    for r in rows:
        r["macs_share"] = r["macs_per_image"] / total
    return rows


def _cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key == "macs_per_image":
        return f"{value:,}"
    if key == "macs_share":
        return f"{100 * value:.2f} %"
    if key in ("relative_energy", "relative_power"):
        return f"{value:.3f}"
    if key == "exact_gradients":
        return "yes" if value else ""
    return str(value)


def table_lines(title: str, head, columns, rows: list[dict], cell) -> list[str]:
    """A titled markdown table: `head` over one line per row, cell(key, value) for each of `columns`."""
    return [title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(cell(k, r[k]) for k in columns) + " |" for r in rows)]


def csv_of(rows: list[dict], columns) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def markdown(rows: list[dict], title: str) -> str:
    lines = table_lines(title, HEAD, COLUMNS, rows, _cell)
    energy = network_energy(rows)
    total = sum(r["macs_per_image"] for r in rows)
    lines += ["", f"{len(rows)} layers, {total:,} multiply-accumulates per image; relative multiplication energy: "
              + (f"{energy:.4f}" if energy is not None else
                 "unknown (no published energy figure for "
                 + ", ".join(sorted({r['multiplier'] for r in rows if r['relative_energy'] is None})) + ")")]
    power = network_power(rows)
    if power is not None:
        lines[-1] += f"; relative multiplication power: {power:.4f}"
    return "\n".join(lines) + "\n"


def csv_text(rows: list[dict]) -> str:
    return csv_of(rows, COLUMNS)


def _rule(text: str) -> dict:
    selector, sep, mult = text.partition("=")
    if not sep or not selector or not mult:
        raise argparse.ArgumentTypeError(f"--rule {text!r}: write SELECTOR=MULT, e.g. stage4=mit16 or first=native")
    return {"match": selector, "mult": mult}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.layer_list", description=__doc__.splitlines()[0])
    parser.add_argument("model", help=", ".join(MODELS))
    parser.add_argument("--dataset", default="digits", help=f"input shape and classes of: {', '.join(DATASETS)}")
    parser.add_argument("--mult", default=NATIVE, help="the cell's multiplier (mult.name, or lut:FILE)")
    parser.add_argument("--keep", default=None, help="a preset of layers kept exact (mult.keep): first, last, "
                                                     "first_last")
    parser.add_argument("--rule", type=_rule, action="append", default=[],
                        help="SELECTOR=MULT, in order (mult.layers); repeat for more")
    parser.add_argument("--csv", default=None, help="also write the table as CSV here")
    args = parser.parse_args(argv)
    if args.model not in MODELS:
        parser.error(f"unknown model {args.model!r}; valid models: {', '.join(MODELS)}")
    if args.dataset not in DATASETS:
        parser.error(f"--dataset {args.dataset!r}: valid data sets are {', '.join(DATASETS)}")
    mult, table = (("lut", args.mult[4:]) if args.mult.startswith("lut:") else (args.mult, None))
    try:
        parse(args.mult)
        settings = resolve(args.model, setting(mult, table), args.rule, args.keep)
    except RuleError as e:
        parser.error("\n  " + "\n  ".join(e.problems))
    except ValueError as e:
        parser.error(str(e))
    spec = DATASETS[args.dataset]
    model = build_model(args.model, NATIVE, spec.input_shape, spec.num_classes)  # shapes only: no ops to build
    rows = layer_rows(args.model, model, settings)
    title = f"Multiplying layers of {args.model} on {args.dataset} ({'x'.join(map(str, spec.input_shape))} inputs)"
    print(markdown(rows, title), end="")
    if args.csv:
        with open(args.csv, "w") as f:
            f.write(csv_text(rows))
        print(f"wrote {args.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
