"""`python -m ops.tables from-c`: the tables of an 8x8 multiplier given as a C model (EvoApproxLib's form).

    python -m ops.tables from-c mul8u/mul8u_2AC.c --bf16 --out ops/luts/evoapprox
    python -m ops.tables from-c my_mul8s.c --exact                 checks the file, prints, writes nothing

Compiles and enumerates the C model (ops/modes/c_models.py), checks that an exact circuit (meta.json's mae% = 0, or
--exact) gives a*b for every pair, and prints the table's error figures (ops/modes/circuit_errors.py) beside the
published ones where meta.json (--meta, else meta.json beside the file or one folder up) lists the circuit. With
--out DIR it writes there:

    <circuit>.int8u.npy / .int8s.npy         the (256, 256) product table (ops/modes/integer_tables.py)
    <circuit>.bf16.bin                       with --bf16 (mul8u only): the bfloat16 mantissa table in the ApproxTrain
                                             format, the circuit as significand multiplier (significand_tables.py)
    <table stem>.cost.json                   each table's figures over the exact circuit's (evoapprox.py), where
                                             meta.json lists both
    <circuit>.provenance.json                the circuit, library and commit, the C file's sha256, the published and
                                             measured figures, and each table's sha256 (what the run wrote)

docs/multipliers.md, section "EvoApproxLib tables", describes the files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ops.atomic import write_bytes
from ops.modes import evoapprox
from ops.modes.c_models import Circuit, table_from_c
from ops.modes.circuit_errors import PUBLISHED_METRICS, agrees_with_published, circuit_errors
from ops.modes.costs import side_file
from ops.modes.integer_tables import exact_table, save_integer_table, table_file_name
from ops.modes.significand_tables import significand_table
from ops.modes.table_files import save_table

SIGNIFICAND_SUFFIX = ".bf16.bin"
PROVENANCE_SUFFIX = ".provenance.json"
INTEGER_FORMAT = ("numpy .npy, (256, 256), table[a, b] = product of the operand bytes a, b (two's complement for "
                  "signed); little-endian uint16 (unsigned) or int16 (signed)")
SIGNIFICAND_FORMAT = ("ApproxTrain mantissa table, m = 7: byte (Fa << 7 | Fb) = c << 7 | M of P = f(128 | Fa, 128 | Fb): "
                      "P >= 2^15: 0x80 | (P >> 8 & 127); 2^14 <= P < 2^15: P >> 7 & 127; P < 2^14: 0 (clamped)")


@dataclass
class FromC:
    """What from_c found and made."""

    circuit: Circuit
    table: np.ndarray                                  # (256, 256) products
    measured: dict[str, float]                         # circuit_errors of the table
    published: evoapprox.Published | None = None       # meta.json's entry, where it lists the circuit
    exact: evoapprox.Published | None = None           # the exact circuit of its set, the figures' reference
    significand: np.ndarray | None = None              # (128, 128) ApproxTrain table, with --bf16
    clamped: int = 0                                   # its entries clamped to 1.0 (products below 2^14)
    disagree: dict[str, str] = field(default_factory=dict)   # published figures the table does not meet
    written: list[Path] = field(default_factory=list)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def from_c(c_file: str | Path, meta: str | Path | None = None, exact: bool = False, bf16: bool = False) -> FromC:
    """Enumerate the C model and make its tables (nothing written); ValueError for a file or circuit that cannot
    be used, RuntimeError where the compiler or the program fails."""
    circuit, table = table_from_c(c_file)
    result = FromC(circuit, table, circuit_errors(table, circuit.kind))
    meta = meta if meta is not None else evoapprox.default_meta(c_file)
    if meta is not None:
        listing = evoapprox.read_meta(meta)
        result.published = evoapprox.find_published(listing, circuit.name)
        if result.published is not None:
            result.exact = evoapprox.exact_circuit(listing, result.published)
            result.disagree = agrees_with_published(result.measured, result.published.params)
    if exact or (result.published is not None and result.published.is_exact):
        wrong = np.argwhere(table.astype(np.int64) != exact_table(circuit.kind).astype(np.int64))
        if wrong.size:
            a, b = (int(i) for i in wrong[0])
            raise ValueError(f"{circuit.name} is taken as exact ({'--exact' if exact else 'mae% = 0 in meta.json'}) "
                             f"but differs from a*b at {len(wrong)} operand pairs, first f({a}, {b}) = "
                             f"{int(table[a, b])}, exact {int(exact_table(circuit.kind)[a, b])}")
    if bf16:
        if circuit.kind != "unsigned":
            raise ValueError(f"{circuit.name} is signed: a significand multiplier is unsigned (mul8u); a signed "
                             "circuit gives its integer table only")
        result.significand, result.clamped = significand_table(table)
    return result


def _cost_file(result: FromC, table_path: Path, significand_only: bool, commit: str) -> Path | None:
    if result.published is None or result.exact is None:
        return None
    data = evoapprox.cost_side_data(result.published, result.exact, significand_only, commit)
    path = side_file(table_path)
    write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
    return path


def write(result: FromC, c_file: Path, out: Path, commit: str = evoapprox.LIBRARY_COMMIT) -> list[Path]:
    """Write the tables, their cost side files and the provenance into `out`; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    name, kind = result.circuit.name, result.circuit.kind
    tables: dict[str, dict] = {}
    integer_path = save_integer_table(result.table, kind, out / table_file_name(name, kind))
    tables[integer_path.name] = {"format": INTEGER_FORMAT}
    written = [integer_path, *filter(None, [_cost_file(result, integer_path, False, commit)])]
    if result.significand is not None:
        significand_path = save_table(result.significand, out / (name + SIGNIFICAND_SUFFIX))
        tables[significand_path.name] = {"format": SIGNIFICAND_FORMAT, "clamped_entries": result.clamped}
        written += [significand_path, *filter(None, [_cost_file(result, significand_path, True, commit)])]
    for path in written:
        if path.name in tables:
            tables[path.name]["sha256"] = sha256_of(path)
            cost = side_file(path)
            if cost in written:
                tables[path.name]["cost_file"] = cost.name
    published = result.published
    provenance = {
        "circuit": name, "kind": kind,
        "library": evoapprox.LIBRARY, "library_url": evoapprox.LIBRARY_URL, "library_commit": commit,
        "c_file": c_file.name, "c_file_sha256": sha256_of(c_file),
        "function": f"{result.circuit.result_type} {name}({', '.join(result.circuit.parameter_types)})",
        "published": dict(published.params) if published else None,
        "published_in": list(published.sets) if published else [],
        "references": list(published.references) if published else [],
        "exact_reference": ({"circuit": result.exact.name, "published": dict(result.exact.params)}
                            if result.exact else None),
        "measured": result.measured,
        "agrees_with_published": (not result.disagree) if published else None,
        "tables": tables,
        "generated_by": "python -m ops.tables from-c (ops/modes/table_command.py)",
    }
    provenance_path = out / (name + PROVENANCE_SUFFIX)
    write_bytes(provenance_path, (json.dumps(provenance, indent=2) + "\n").encode())
    return [*written, provenance_path]


def report(result: FromC, c_file: Path) -> str:
    """What the run found, as lines a user reads."""
    circuit = result.circuit
    lines = [f"{circuit.name}: {circuit.kind} 8x8 multiplier, "
             f"{circuit.result_type} {circuit.name}({', '.join(circuit.parameter_types)}), from {c_file}"]
    published = result.published.params if result.published else {}
    if result.published:
        lines.append(f"published (meta.json, {', '.join(result.published.sets)}): pwr {published['pwr']} mW, "
                     f"area {published['area']} um^2, delay {published['delay']} ns")
    else:
        lines.append("not listed in meta.json (or no meta.json given): no published figures, no cost side file")
    lines.append(f"  {'metric':<7} {'measured':>12} {'published':>10}")
    for metric in PUBLISHED_METRICS:
        lines.append(f"  {metric:<7} {result.measured[metric]:>12.6g} {published.get(metric, '-'):>10}")
    lines.append(f"  MAE {result.measured['mae']:.6g}, WCE {result.measured['wce']}, MSE {result.measured['mse']:.6g} "
                 "(over 2^16 operand pairs; % of the output range 2^16, MRE over the nonzero exact products)")
    if result.published:
        lines.append("the table meets every published error figure (within its rounding)" if not result.disagree
                     else "WARNING: the table does not meet the published " + "; ".join(
                         f"{metric} ({text})" for metric, text in result.disagree.items()))
    if result.significand is not None:
        lines.append(f"bfloat16 significand table: {result.clamped} of 16384 entries clamped to 1.0 "
                     "(products below 2^14)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.tables", description="Multiplier tables made from circuits.")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("from-c", help="the tables of an 8x8 multiplier given as a C model "
                                                 "(EvoApproxLib's mul8u_/mul8s_ form)")
    command.add_argument("c_file", type=Path, help="the C model: one function mul8u_<ID> or mul8s_<ID>")
    command.add_argument("--out", type=Path, help="write the tables, cost side files and provenance here "
                                                  "(without: check and print only)")
    command.add_argument("--meta", type=Path, help="EvoApproxLib's meta.json (default: beside the file or one "
                                                   "folder up)")
    command.add_argument("--exact", action="store_true", help="the circuit is exact: fail unless it gives a*b")
    command.add_argument("--bf16", action="store_true", help="also the bfloat16 mantissa table (ApproxTrain format), "
                                                             "the circuit as significand multiplier (mul8u only)")
    command.add_argument("--commit", default=evoapprox.LIBRARY_COMMIT,
                         help=f"the library commit the C file comes from (default {evoapprox.LIBRARY_COMMIT})")
    args = parser.parse_args(argv)
    try:
        result = from_c(args.c_file, args.meta, args.exact, args.bf16)
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(report(result, args.c_file))
    if args.out is None:
        print("nothing written (give --out DIR to write the tables)")
        return 0
    for path in write(result, args.c_file, args.out, args.commit):
        print(f"wrote {path}")
    return 0
