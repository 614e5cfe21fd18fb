"""What the compiled-kernel tests share: the modes to run (one list, from the registry), and raw-op access."""

from __future__ import annotations

import numpy as np

import ops
from ops.api import kernel_arguments
from ops.library import library

from conftest import lut_dir


def kernel_modes() -> list[str]:
    """Every simulated mode of the registry plus the three published tables as lut modes."""
    tables = [f"lut:{lut_dir() / name}" for name in ("MBM_7.bin", "MIT_7.bin", "ACC_7.bin")]
    return ops.names(include_native=False) + tables


def raw_matmul(a, b, multiplier, transpose_a=False, transpose_b=False) -> np.ndarray:
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_mat_mul(np.asarray(a, np.float32), np.asarray(b, np.float32), table, multiplier=attr,
                                   transpose_a=transpose_a, transpose_b=transpose_b).numpy()


def raw_conv_backprop_input(input_sizes, w, dy, multiplier, strides=(1, 1), padding="VALID", dilations=(1, 1)):
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_conv2d_backprop_input(
        np.asarray(input_sizes, np.int32), np.asarray(w, np.float32), np.asarray(dy, np.float32), table,
        multiplier=attr, strides=list(strides), padding=padding, dilations=list(dilations)).numpy()


def raw_conv_backprop_filter(x, filter_sizes, dy, multiplier, strides=(1, 1), padding="VALID", dilations=(1, 1)):
    attr, table = kernel_arguments(multiplier)
    return library().amdnn_conv2d_backprop_filter(
        np.asarray(x, np.float32), np.asarray(filter_sizes, np.int32), np.asarray(dy, np.float32), table,
        multiplier=attr, strides=list(strides), padding=padding, dilations=list(dilations)).numpy()
