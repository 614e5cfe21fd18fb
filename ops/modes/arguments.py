"""What every binding passes to the compiled kernels for a multiplier: the kernels' mode name and the table bytes.

Framework-free (numpy only), so the TensorFlow and the PyTorch bindings share it.
"""

from __future__ import annotations

import numpy as np

from ops.modes.multipliers import names, parse
from ops.modes.table_files import canonical7

_EMPTY_TABLE = np.zeros([0], np.uint8)
_EMPTY_TABLE.setflags(write=False)


def kernel_arguments(multiplier) -> tuple[str, np.ndarray]:
    """The compiled ops' (multiplier attribute, table bytes) for a mode name, "lut:<file>" or a Multiplier: the
    table's own 4**m bytes for lut modes (the kernels validate and expand them), else no bytes."""
    spec = parse(multiplier)
    if spec.family == "native":
        raise ValueError("multiplier 'native' is the framework's own op, not a simulated one: use tf.nn.conv2d / "
                         "tf.matmul, torch.nn.functional.conv2d / torch.matmul, or a native Keras layer; simulated "
                         "modes: "
                         f"{', '.join(names(include_native=False))}")
    if spec.is_integer:
        raise ValueError(f"multiplier {spec.name!r} is an integer mode: it quantises its operands to 8-bit codes, so "
                         "it runs as a layer (models' integer layers, ops.keras_integer), not as ops.conv2d / "
                         "ops.matmul on floats")
    if spec.table is not None:
        return "table", np.ascontiguousarray(spec.table, dtype=np.uint8).reshape(-1)
    return spec.name, _EMPTY_TABLE


def canonical_table_bytes(multiplier) -> np.ndarray:
    """The canonical 128 x 128 form of a lut mode's table as 16384 bytes (what the GPU kernels read), or no bytes."""
    attr, table = kernel_arguments(multiplier)
    if attr != "table":
        return table
    return np.ascontiguousarray(canonical7(parse(multiplier).table), dtype=np.uint8).reshape(-1)
