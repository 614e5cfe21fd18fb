"""The kernels' mode list (ops/cc/multiplier_modes.h) and Python's registry name the same modes in the same order.

The C++ list makes the enum whose values the bindings pass as `mode`, so a name in one list and not the other, or
two names swapped, would run one multiplier under another's name; this reads the header without building anything.
"""
import re

from ops.build.common import SOURCE_DIR
from ops.modes.multipliers import LUT_NAME, names

MODE_LINE = re.compile(r'X\(\s*k\w+\s*,\s*"([^"]+)"\s*,\s*\w+\s*\)')


def kernel_mode_names() -> list[str]:
    """The names of AMDNN_MODES, in the enum's order."""
    return MODE_LINE.findall((SOURCE_DIR / "multiplier_modes.h").read_text())


def test_the_kernels_mode_list_is_the_registry():
    # "table" is the kernels' name of the mode users write as lut:<file>
    assert kernel_mode_names() == [*names(include_native=False), "table"]


def test_the_header_is_read():
    """The pattern finds every line of the list (a changed X(...) layout must not make the test above vacuous)."""
    header = (SOURCE_DIR / "multiplier_modes.h").read_text()
    assert len(kernel_mode_names()) == header.count("  X(k") >= 8
    assert LUT_NAME == "lut"
