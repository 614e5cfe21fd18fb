"""Tables from 8x8 multipliers' C models (`python -m ops.tables from-c`, ops/modes/table_command.py and the modules
it names): C files of EvoApproxLib's form written here, compiled and enumerated for real and checked value by value;
the exact circuit's bfloat16 table equal to ACC_7.bin; the shipped tables of ops/luts/evoapprox/ checked against their
provenance (and against the library's C models where its folder is at hand); a shipped table trained with as
`mult=lut` and its cost read."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from ops.modes import c_models, evoapprox, table_command
from ops.modes.circuit_errors import agrees_with_published, circuit_errors
from ops.modes.integer_tables import read_integer_table
from ops.modes.significand_tables import significand_table
from ops.modes.table_files import read_table

from tests.ops.luts import lut_dir

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "ops" / "luts" / "evoapprox"
HEADER = "#include <stdint.h>\n#include <stdlib.h>\n"
# C models in EvoApproxLib's forms (1JFF's, 1KV8's, 1L2H's and 2AC's signatures).
EXACT_U = HEADER + "uint16_t mul8u_EXU(uint8_t a, uint8_t b)\n{\n  return (uint16_t)(a * b);\n}\n"
EXACT_S = HEADER + "int16_t mul8s_EXS(int8_t A, int8_t B)\n{\n  return (int16_t)(A * B);\n}\n"
TRUNCATED_U = HEADER + "uint16_t mul8u_TRU(uint8_t A, uint8_t B)\n{\n  return (uint16_t)((A * B) & 0xFF00);\n}\n"
TRUNCATED_S = HEADER + ("uint16_t mul8s_TRS(uint8_t A, uint8_t B)\n{\n"
                        "  int16_t p = (int16_t)((int8_t)A * (int8_t)B);\n  return (uint16_t)(p & ~0xF);\n}\n")
ASYMMETRIC_U = HEADER + "uint64_t mul8u_ASY(const uint64_t B,const uint64_t A)\n{\n  return 2 * B + A;\n}\n"
HALVED_U = HEADER + "uint16_t mul8u_HLF(uint8_t A, uint8_t B)\n{\n  return (uint16_t)((A * B) >> 1);\n}\n"


def c_file(folder: Path, text: str, name: str | None = None) -> Path:
    name = name or re.search(r"(mul8[us]_\w+)\(", text).group(1)
    path = folder / f"{name}.c"
    path.write_text(text)
    return path


def evoapprox_dir() -> Path | None:
    """The library's folder (mul8u/, mul8s/, meta.json) named by AMDNN_EVOAPPROX_DIR (a test fails if it holds no
    meta.json); None where it is not set (.ci/run sets it where the team's copy lies beside the clone)."""
    named = os.environ.get("AMDNN_EVOAPPROX_DIR")
    if named:
        assert (Path(named) / "meta.json").is_file(), f"AMDNN_EVOAPPROX_DIR={named!r} holds no meta.json"
        return Path(named)
    return None


def operands(kind: str) -> np.ndarray:
    """Operand values by byte, computed here independently of ops.modes.circuit_errors."""
    values = np.arange(256, dtype=np.int64)
    return values if kind == "unsigned" else values.astype(np.uint8).view(np.int8).astype(np.int64)


# (a) C files of the library's form, compiled and enumerated for real


@pytest.mark.parametrize("text, kind, expected", [
    (EXACT_U, "unsigned", lambda a, b: a * b),
    (EXACT_S, "signed", lambda a, b: a * b),
    (TRUNCATED_U, "unsigned", lambda a, b: (a * b) & 0xFF00),
    (TRUNCATED_S, "signed", lambda a, b: (a * b) & ~0xF),
    (ASYMMETRIC_U, "unsigned", lambda a, b: 2 * a + b),  # positional: the first argument is the row, whatever its name
], ids=["exact-unsigned", "exact-signed", "truncated-unsigned", "truncated-signed-uint16-form", "asymmetric-uint64-form"])
def test_a_c_model_is_enumerated_value_by_value(tmp_path, text, kind, expected):
    circuit, table = c_models.table_from_c(c_file(tmp_path, text))
    assert circuit.kind == kind
    assert table.shape == (256, 256) and table.dtype == np.dtype("<u2" if kind == "unsigned" else "<i2")
    a, b = operands(kind)[:, None], operands(kind)[None, :]
    assert np.array_equal(table.astype(np.int64), expected(a, b))
    assert int(table[255, 255]) == int(expected(np.int64(operands(kind)[255]), np.int64(operands(kind)[255])))


def test_error_figures_of_a_truncated_multiplier_by_hand(tmp_path):
    _, table = c_models.table_from_c(c_file(tmp_path, TRUNCATED_U))
    errors, relative = [], []
    for a in range(256):
        for b in range(256):
            errors.append((a * b) - int(table[a, b]))  # the low byte, dropped
            if a * b:
                relative.append(errors[-1] / (a * b))
    assert max(errors) == 255  # e.g. 255 x 1
    measured = circuit_errors(table, "unsigned")
    assert measured["mae"] == pytest.approx(sum(errors) / 65536, rel=1e-12)
    assert measured["mae%"] == pytest.approx(100 * sum(errors) / 65536 / 65536, rel=1e-12)
    assert measured["wce%"] == pytest.approx(100 * 255 / 65536, rel=1e-12)
    assert measured["ep%"] == pytest.approx(100 * sum(e != 0 for e in errors) / 65536, rel=1e-12)
    assert measured["mre%"] == pytest.approx(100 * sum(relative) / len(relative), rel=1e-12)  # 0 = a*b left out
    assert measured["wcre%"] == pytest.approx(100 * max(relative), rel=1e-12)
    assert measured["mse"] == pytest.approx(sum(e * e for e in errors) / 65536, rel=1e-12)


@pytest.mark.parametrize("text, message", [
    (HEADER + "uint16_t mul8u_BAD(uint8_t A, uint8_t B, uint8_t C)\n{\n  return A * B * C;\n}\n",
     "defines mul8u_BAD in another form"),
    (EXACT_U + EXACT_U.replace("EXU", "EX2"), "defines 2 multiplier functions (mul8u_EXU, mul8u_EX2)"),
    (HEADER + "int add8u_X(int a, int b) { return a + b; }\n", "defines no mul8u_/mul8s_ function"),
], ids=["three-operands", "two-functions", "no-multiplier"])
def test_a_malformed_c_model_is_refused_with_the_expected_form(tmp_path, text, message):
    with pytest.raises(ValueError) as error:
        c_models.find_circuit(c_file(tmp_path, text, "malformed"))
    assert message in str(error.value) and "malformed.c" in str(error.value)
    assert "uint16_t mul8u_<ID>(uint8_t A, uint8_t B)" in str(error.value)


def test_a_model_that_does_not_compile_or_overflows_says_so(tmp_path):
    broken = c_file(tmp_path, HEADER + "uint16_t mul8u_BRK(uint8_t A, uint8_t B)\n{\n  return A * ;\n}\n")
    with pytest.raises(RuntimeError, match=r"(?s)mul8u_BRK.c' does not compile with .*mul8u_BRK.c:5:.*error"):
        c_models.table_from_c(broken)
    wide = c_file(tmp_path, HEADER + "uint64_t mul8u_WID(const uint64_t B,const uint64_t A)\n{\n  return B << 9;\n}\n")
    with pytest.raises(RuntimeError, match=r"mul8u_WID\(128, 0\) = 65536 does not fit in 16 bits"):
        c_models.table_from_c(wide)


def test_an_inexact_circuit_taken_as_exact_is_refused(tmp_path, capsys):
    path = c_file(tmp_path, TRUNCATED_U)
    assert table_command.main(["from-c", str(path), "--exact", "--out", str(tmp_path / "out")]) == 1
    low_byte = (np.arange(256)[:, None] * np.arange(256)[None, :]) & 0xFF
    wrong = int((low_byte != 0).sum())  # every pair but those whose product is a multiple of 256
    assert f"differs from a*b at {wrong} operand pairs, first f(1, 1) = 0, exact 1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


# (b) the significand table of the exact circuit is ACC_7.bin


def test_exact_circuit_significand_table_is_acc7_byte_for_byte(tmp_path, capsys):
    path = c_file(tmp_path, EXACT_U)
    assert table_command.main(["from-c", str(path), "--exact", "--bf16", "--out", str(tmp_path)]) == 0
    assert "0 of 16384 entries clamped" in capsys.readouterr().out
    made = (tmp_path / "mul8u_EXU.bf16.bin").read_bytes()
    assert made == (lut_dir() / "ACC_7.bin").read_bytes()
    table, kind = read_integer_table(tmp_path / "mul8u_EXU.int8u.npy")
    assert kind == "unsigned" and int(table[255, 254]) == 255 * 254
    provenance = json.loads((tmp_path / "mul8u_EXU.provenance.json").read_text())
    assert provenance["c_file_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert provenance["published"] is None and not (tmp_path / "mul8u_EXU.bf16.cost.json").exists()  # no meta.json
    library = evoapprox_dir()
    if library is not None:  # the library's own exact circuit too
        _, real = c_models.table_from_c(library / "mul8u" / "mul8u_1JFF.c")
        assert significand_table(real)[0].tobytes() == (lut_dir() / "ACC_7.bin").read_bytes()


def test_products_below_one_are_clamped_and_counted(tmp_path):
    _, table = c_models.table_from_c(c_file(tmp_path, HALVED_U))
    made, clamped = significand_table(table)
    significand = 128 + np.arange(128)
    product = (significand[:, None] * significand[None, :]) >> 1   # [2^13, 2^15): never reaches 2.0
    assert clamped == int((product < 2**14).sum()) > 0
    expected = np.where(product < 2**14, 0, (product >> 7) & 127)
    assert np.array_equal(made, expected)
    assert made[0, 0] == 0 and made[127, 127] == (255 * 255 >> 1 >> 7) & 127


def test_a_signed_circuit_has_no_significand_table(tmp_path, capsys):
    assert table_command.main(["from-c", str(c_file(tmp_path, EXACT_S)), "--bf16"]) == 1
    assert "mul8s_EXS is signed: a significand multiplier is unsigned" in capsys.readouterr().err


# (c) the shipped tables


def shipped_provenance() -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(SHIPPED.glob("*.provenance.json"))]


def test_shipped_tables_are_listed_in_the_readme():
    rows = re.findall(r"^\| (mul8[us]_\w+) \| (\w+) \| ([^|]+) \| ([0-9a-f]{64}) \|$",
                      (SHIPPED / "README.md").read_text(), re.MULTILINE)
    listed = {name: (kind, tables.strip().split(", "), sha) for name, kind, tables, sha in rows}
    shipped = {p["circuit"]: (p["kind"], list(p["tables"]), p["c_file_sha256"]) for p in shipped_provenance()}
    assert listed == shipped and len(shipped) == 12
    files = {path.name for path in SHIPPED.iterdir()} - {"README.md"}
    named = {f"{p['circuit']}.provenance.json" for p in shipped_provenance()}
    named |= {name for p in shipped_provenance() for name in p["tables"]}
    named |= {entry["cost_file"] for p in shipped_provenance() for entry in p["tables"].values()}
    assert files == named  # nothing unexplained


@pytest.mark.parametrize("provenance", shipped_provenance(), ids=lambda p: p["circuit"])
def test_shipped_table_matches_its_provenance(provenance):
    """Without the C models: the sha256s, the error figures recomputed from the table equal to the published ones,
    the bfloat16 table made from the integer one, and the cost files from the published figures."""
    name, kind = provenance["circuit"], provenance["kind"]
    assert (provenance["library"], provenance["library_commit"]) == ("EvoApproxLib", "d321f7f6")
    for file, entry in provenance["tables"].items():
        assert hashlib.sha256((SHIPPED / file).read_bytes()).hexdigest() == entry["sha256"], file
    table, table_kind = read_integer_table(SHIPPED / f"{name}.int8{kind[0]}.npy")
    assert table_kind == kind
    measured = circuit_errors(table, kind)
    assert measured == pytest.approx(provenance["measured"], rel=1e-12)
    assert agrees_with_published(measured, provenance["published"]) == {}
    exact = evoapprox.Published(provenance["exact_reference"]["circuit"], provenance["exact_reference"]["published"],
                                (), "")
    published = evoapprox.Published(name, provenance["published"], (), "", tuple(provenance["references"]))
    for file, entry in provenance["tables"].items():
        significand = file.endswith(".bf16.bin")
        cost = json.loads((SHIPPED / entry["cost_file"]).read_text())
        assert cost == evoapprox.cost_side_data(published, exact, significand_only=significand)
        assert ("significand multiplier only" in cost["source"]) == significand
    if kind == "unsigned":
        made, clamped = significand_table(table)
        assert np.array_equal(read_table(SHIPPED / f"{name}.bf16.bin"), made)
        assert clamped == provenance["tables"][f"{name}.bf16.bin"]["clamped_entries"]
    if float(provenance["published"]["mae%"]) == 0:
        assert measured["wce"] == 0
        if kind == "unsigned":
            assert (SHIPPED / f"{name}.bf16.bin").read_bytes() == (lut_dir() / "ACC_7.bin").read_bytes()


def test_shipped_tables_are_their_c_models():
    """Where the library's folder is at hand: each shipped table is what its C file enumerates to."""
    library = evoapprox_dir()
    if library is None:
        pytest.skip("no EvoApproxLib folder (set AMDNN_EVOAPPROX_DIR to it); "
                    "the shipped tables are still checked against their provenance")
    for provenance in shipped_provenance():
        name, kind = provenance["circuit"], provenance["kind"]
        source = library / name[:5] / provenance["c_file"]
        assert hashlib.sha256(source.read_bytes()).hexdigest() == provenance["c_file_sha256"], name
        result = table_command.from_c(source, meta=library / "meta.json", bf16=kind == "unsigned")
        shipped, _ = read_integer_table(SHIPPED / f"{name}.int8{kind[0]}.npy")
        assert np.array_equal(result.table, shipped), name
        assert result.disagree == {} and dict(result.published.params) == provenance["published"], name
        if kind == "unsigned":
            assert result.significand.tobytes() == (SHIPPED / f"{name}.bf16.bin").read_bytes(), name


# (d) a shipped table as a cell's multiplier, with its cost


def test_a_shipped_table_is_a_cells_multiplier_with_its_published_cost():
    from ops.modes.multipliers import parse
    from orchestrator.config.validate import mult_spec, validate
    from tests.orchestrator.helpers import compose

    table = SHIPPED / "mul8u_2AC.bf16.bin"
    cell = validate(compose("mult=lut", f"mult.table={table}"))
    mode = parse(mult_spec(cell))
    assert mode.family == "table" and mode.mantissa_bits == 7
    assert np.array_equal(mode.table, read_table(table))
    provenance = json.loads((SHIPPED / "mul8u_2AC.provenance.json").read_text())
    exact = provenance["exact_reference"]["published"]
    assert (provenance["published"]["pwr"], exact["pwr"]) == ("0.311", "0.391")
    assert mode.cost.power == pytest.approx(0.311 / 0.391, abs=5e-5)
    assert mode.cost.area == pytest.approx(508.3 / 709.6, abs=5e-5)
    assert mode.cost.delay == pytest.approx(1.39 / 1.43, abs=5e-5)
    assert mode.cost.energy is None and mode.cost.reference == "mul8u_1JFF"
    assert mode.cost.absolute == {"pwr_mW": 0.311, "area_um2": 508.3, "delay_ns": 1.39}
    assert "EvoApproxLib d321f7f6" in mode.cost.source and "PDK45" in mode.cost.source
