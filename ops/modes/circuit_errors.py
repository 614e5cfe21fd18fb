"""The error of an 8x8 integer multiplier over all its operand pairs, the way EvoApproxLib defines and publishes it.

    circuit_errors(table, "unsigned")   {"mae%": ..., "wce%": ..., "mre%": ..., "ep%": ..., "wcre%": ..., "mae": ...}
    agrees_with_published(measured, published)   the metrics whose published figure the measured one does not round to

Over the 65,536 pairs (a, b), with e = f(a, b) - a*b (a, b the operands' values: 0..255, or -128..127 signed):
MAE = mean |e|, WCE = max |e|, MSE = mean e^2; MAE% and WCE% are MAE and WCE over the output range 2^16 (x 100);
MRE% = 100 mean |e| / |a*b| over the pairs whose exact product is not 0, WCRE% its maximum; EP% = 100 x the fraction
of pairs with e != 0. These reproduce the figures of EvoApproxLib's meta.json for its 8x8 multipliers
(tests/ops/test_evoapprox_tables.py), given how they were rounded: EvoApproxLib rounds MAE and WCE to two significant
digits before dividing by 2^16 (mul8s_1KVA: MAE 1.25, published as 1.2 and MAE% 0.0018, where 1.25 / 2^16 is
0.0019 %), so a published MAE% or WCE% is met by either the figure or the one from the rounded MAE or WCE.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Mapping

import numpy as np

OUTPUT_RANGE = 2**16  # an 8x8 product's output range: what MAE% and WCE% are relative to
PUBLISHED_METRICS = ("mae%", "wce%", "mre%", "ep%", "wcre%")  # the percentages meta.json gives for every circuit


def operand_values(kind: str) -> np.ndarray:
    """The 256 operand values by bit pattern: 0..255 unsigned; two's complement 0..127, -128..-1 signed."""
    patterns = np.arange(256, dtype=np.int64)
    if kind == "unsigned":
        return patterns
    if kind == "signed":
        return np.where(patterns >= 128, patterns - 256, patterns)
    raise ValueError(f"kind {kind!r} is neither 'unsigned' nor 'signed'")


def exact_products(kind: str) -> np.ndarray:
    """(256, 256) int64: a*b for the operand bytes a, b of the kind."""
    values = operand_values(kind)
    return values[:, None] * values[None, :]


def circuit_errors(table: np.ndarray, kind: str) -> dict[str, float]:
    """EvoApproxLib's error metrics of a (256, 256) product table: the percentages of PUBLISHED_METRICS and the
    absolute mae, wce, mse."""
    table = np.asarray(table)
    if table.shape != (256, 256):
        raise ValueError(f"an 8x8 product table has shape (256, 256), got {table.shape}")
    exact = exact_products(kind)
    error = np.abs(table.astype(np.int64) - exact)
    nonzero = exact != 0
    relative = error[nonzero] / np.abs(exact[nonzero])
    return {
        "mae%": 100 * float(error.mean()) / OUTPUT_RANGE,
        "wce%": 100 * float(error.max()) / OUTPUT_RANGE,
        "mre%": 100 * float(relative.mean()),
        "ep%": 100 * float((error != 0).mean()),
        "wcre%": 100 * float(relative.max()),
        "mae": float(error.mean()),
        "wce": int(error.max()),
        "mse": float((error.astype(np.float64) ** 2).mean()),
    }


def _two_significant_digits(value: float) -> float:
    """value rounded to two significant digits, halves to even (as EvoApproxLib's MAE = 1.2 for 1.25)."""
    return float(f"{value:.2g}") if value else 0.0


def rounding_of(published: str) -> float:
    """Half a unit of the last digit a figure is published with: "0.081" -> 0.0005, "74.61" -> 0.005."""
    exponent = Decimal(published.strip()).as_tuple().exponent
    return 0.5 * 10.0 ** int(exponent)


def agrees_with_published(measured: Mapping[str, float], published: Mapping[str, str]) -> dict[str, str]:
    """Each metric of PUBLISHED_METRICS given in `published` (meta.json's strings) that `measured` does not equal
    within the figure's rounding, as metric -> "measured ... published ..."; empty when all agree."""
    disagree = {}
    for metric in PUBLISHED_METRICS:
        if metric not in published:
            continue
        candidates = [measured[metric]]
        if metric in ("mae%", "wce%"):  # also the figure from the absolute error as EvoApproxLib rounds it
            candidates.append(100 * _two_significant_digits(measured[metric[:-1]]) / OUTPUT_RANGE)
        tolerance = rounding_of(published[metric]) * (1 + 1e-9)
        if all(abs(value - float(published[metric])) > tolerance for value in candidates):
            disagree[metric] = f"measured {measured[metric]:.6g}, published {published[metric]}"
    return disagree
