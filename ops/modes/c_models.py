"""An 8x8 multiplier given as a C model (EvoApproxLib's form), compiled and run on all 65,536 operand pairs.

    circuit = find_circuit(Path("mul8u_2AC.c"))     the one multiplier function the file defines, or ValueError
    table = enumerate_circuit(circuit)              (256, 256) uint16 / int16: table[a, b] = f(a, b)

A C model is a pure function of its two operands, so its 65,536 products are its whole behaviour. The file must
define exactly one function named mul8u_<ID> (unsigned) or mul8s_<ID> (signed) of two integer parameters returning
an integer: EvoApproxLib writes `uint16_t mul8u_1JFF(uint8_t a, uint8_t b)`, `int16_t mul8s_1KV8(int8_t A, int8_t B)`,
`uint16_t mul8s_1L2H(uint8_t A, uint8_t B)` and `uint64_t mul8u_2AC(const uint64_t B, const uint64_t A)` alike. The
operands are passed by position: table[a, b] is the function called with a first, whatever its parameters are named.
An operand is its byte a = 0..255; a parameter of a signed type gets the byte's two's-complement value (a - 256 for
a >= 128), one of an unsigned type the byte itself. The result must fit in 16 bits: 0..65535 for mul8u; for mul8s an
int16 value, or its 16-bit two's-complement pattern where the function returns an unsigned type.

The system C compiler ($CC, else cc, else gcc) compiles the file together with a small driver (DRIVER) that writes
the 65,536 results, in a temporary folder; nothing is left behind.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

OPERAND_VALUES = 256  # 8-bit operands: table index 0..255, the operand's bit pattern
PRODUCT_BITS = 16     # an 8x8 product's output width
KINDS = {"mul8u": "unsigned", "mul8s": "signed"}
TABLE_DTYPES = {"unsigned": np.dtype("<u2"), "signed": np.dtype("<i2")}
COMPILE_TIMEOUT_S = 300

_INTEGER_TYPE = (r"(?:u?int(?:8|16|32|64)_t|(?:unsigned|signed)\s+(?:char|short|int|long(?:\s+long)?)|"
                 r"unsigned|char|short|int|long(?:\s+long)?)")
_PARAMETER = rf"(?:const\s+)?({_INTEGER_TYPE})\s+(?:const\s+)?\w+"
_FUNCTION = re.compile(rf"^[ \t]*(?:static\s+)?(?:inline\s+)?({_INTEGER_TYPE})\s+(mul8[us]_\w+)\s*"
                       rf"\(\s*{_PARAMETER}\s*,\s*{_PARAMETER}\s*\)\s*\{{", re.MULTILINE)
# Any definition of a mul8u_/mul8s_ function, whatever its form: to refuse a file whose multiplier is malformed.
_ANY_DEFINITION = re.compile(r"\b(mul8[us]_\w+)\s*\(([^;{}()]*)\)\s*\{")
EXPECTED_FORM = ("exactly one function `uint16_t mul8u_<ID>(uint8_t A, uint8_t B)` (unsigned) or "
                 "`int16_t mul8s_<ID>(int8_t A, int8_t B)` (signed), as EvoApproxLib's C models define "
                 "(any integer types of the two parameters and the result are taken)")


@dataclass(frozen=True)
class Circuit:
    """The multiplier function a C file defines."""

    path: Path
    name: str              # the function's name: mul8u_2AC
    kind: str              # "unsigned" (mul8u_) or "signed" (mul8s_)
    result_type: str       # as written in the file: "uint16_t"
    parameter_types: tuple[str, str]

    @property
    def dtype(self) -> np.dtype:
        """The table's dtype: little-endian uint16 for unsigned circuits, int16 for signed ones."""
        return TABLE_DTYPES[self.kind]


def _without_comments(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", " ", source, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", source)


def find_circuit(path: str | os.PathLike) -> Circuit:
    """The one multiplier function of the C file `path`; ValueError naming the file and the expected form if it
    defines none, more than one, or one of another form."""
    path = Path(path)
    try:
        source = _without_comments(path.read_text(errors="replace"))
    except OSError as e:
        raise ValueError(f"C model {str(path)!r} cannot be read: {e.strerror or e}") from None
    matches = list(_FUNCTION.finditer(source))
    definitions = [m.group(1) for m in _ANY_DEFINITION.finditer(source)]
    if len(matches) == 1 and len(definitions) == 1:
        result, name, first, second = matches[0].groups()
        return Circuit(path, name, KINDS[name[:5]], " ".join(result.split()),
                       (" ".join(first.split()), " ".join(second.split())))
    if not definitions:
        found = "defines no mul8u_/mul8s_ function"
    elif len(definitions) > 1:
        found = f"defines {len(definitions)} multiplier functions ({', '.join(definitions)})"
    else:
        found = f"defines {definitions[0]} in another form (not two integer operands returning an integer)"
    raise ValueError(f"C model {str(path)!r} {found}; expected {EXPECTED_FORM}")


def compiler() -> str:
    """The system C compiler: $CC, else cc, else gcc; RuntimeError saying what to install if there is none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise RuntimeError("no C compiler found ($CC, cc, gcc): install one (Debian: apt-get install gcc) or set CC; "
                       "a C model is compiled to enumerate its products")


def _is_signed(type_name: str) -> bool:
    return not (type_name.startswith("uint") or "unsigned" in type_name)


def driver_source(circuit: Circuit) -> str:
    """The C driver: includes the model, calls it on every operand pair (a first) and writes the 16-bit results."""
    low, high = (-(1 << 15), (1 << 16) - 1) if circuit.kind == "signed" else (0, (1 << 16) - 1)
    first, second = (f"({t})(int8_t){v}" if _is_signed(t) else f"({t}){v}"
                     for t, v in zip(circuit.parameter_types, "ab"))
    return f"""#include <stdint.h>
#include <stdio.h>
#include "{circuit.name}.c"

int main(int argc, char **argv) {{
  static unsigned char out[2 * {OPERAND_VALUES} * {OPERAND_VALUES}];  /* little-endian 16-bit results */
  for (unsigned a = 0; a < {OPERAND_VALUES}; a++) {{
    for (unsigned b = 0; b < {OPERAND_VALUES}; b++) {{
      long long value = (long long){circuit.name}({first}, {second});
      if (value < {low}LL || value > {high}LL) {{
        fprintf(stderr, "{circuit.name}(%u, %u) = %lld does not fit in 16 bits\\n", a, b, value);
        return 3;
      }}
      out[2 * (a * {OPERAND_VALUES} + b)] = (unsigned char)(value & 0xFF);
      out[2 * (a * {OPERAND_VALUES} + b) + 1] = (unsigned char)((value >> 8) & 0xFF);
    }}
  }}
  FILE *file = fopen(argv[1], "wb");
  if (!file || fwrite(out, 1, sizeof out, file) != sizeof out || fclose(file) != 0) {{
    perror(argv[1]);
    return 2;
  }}
  return argc == 2 ? 0 : 1;
}}
"""


def enumerate_circuit(circuit: Circuit) -> np.ndarray:
    """The (256, 256) table of the circuit's products, table[a, b] = f(a, b) for the operand bytes a, b: uint16 for
    an unsigned circuit, int16 (the 16-bit result as two's complement) for a signed one. RuntimeError with the
    compiler's or the program's message where the model does not compile or run."""
    cc = compiler()
    with tempfile.TemporaryDirectory(prefix="amdnn-c-model-") as folder:
        folder = Path(folder)
        shutil.copyfile(circuit.path, folder / f"{circuit.name}.c")  # the compiler names it
        (folder / "driver.c").write_text(driver_source(circuit))
        program, output = folder / "enumerate", folder / "products.bin"
        built = subprocess.run([cc, "-std=gnu99", "-O1", "-o", str(program), str(folder / "driver.c")],
                               capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if built.returncode != 0:
            raise RuntimeError(f"C model {str(circuit.path)!r} does not compile with {cc}:\n{built.stderr.strip()}")
        ran = subprocess.run([str(program), str(output)], capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        if ran.returncode != 0:
            raise RuntimeError(f"C model {str(circuit.path)!r} failed when enumerated (exit {ran.returncode}): "
                               f"{ran.stderr.strip()}")
        products = np.fromfile(output, dtype="<u2")
    if products.size != OPERAND_VALUES * OPERAND_VALUES:
        raise RuntimeError(f"C model {str(circuit.path)!r}: the driver wrote {products.size} products, not 65536")
    return products.view(circuit.dtype).reshape(OPERAND_VALUES, OPERAND_VALUES)


def table_from_c(path: str | os.PathLike) -> tuple[Circuit, np.ndarray]:
    """find_circuit and enumerate_circuit of one file."""
    circuit = find_circuit(path)
    return circuit, enumerate_circuit(circuit)
