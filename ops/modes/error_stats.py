"""The error of single products of a multiplier, measured with the numpy reference: the one place that computes it.

docs/multipliers.md (bench.multiplier_stats), `python -m ops.describe` and each training cell's multiplier summary
all read these functions, so the numbers they show are the same numbers.

    relative_errors(mode)      (approx - exact) / exact of OPERANDS standard normal fp32 pairs (seed SEED)
    error_stats(mode)          mean |rel. error|, bias (mean rel. error), max |rel. error| of those pairs
    error_map(mode)            rel. error over every (Fa, Fb) mantissa pair, for modes of <= MAP_MAX_BITS bits
    summary(mode)              all of the above as one dict (what describe prints and a cell logs)
"""

from __future__ import annotations

import numpy as np

from ops.modes.multipliers import Multiplier, parse
from ops.modes.reference import product

OPERANDS = 10**6  # pairs: the standard error of a mean relative error of ~3 % is then ~0.002 %
SEED = 0
MAP_MAX_BITS = 7  # 2**7 x 2**7 = 16,384 pairs cover every mantissa pair of a 7-bit mode; 23 bits would be 2**46
PERCENTILES = (50, 90, 99)  # of |rel. error|: the distribution in three numbers
HISTOGRAM_BINS = 101  # of the signed rel. error, over [-max, +max]: odd, so that exact products have their own bin


def relative_errors(multiplier: str | Multiplier, count: int = OPERANDS, seed: int = SEED) -> np.ndarray:
    """(approx - exact) / exact of `count` products of standard normal float32 pairs, in float64."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(count).astype(np.float32)
    b = rng.standard_normal(count).astype(np.float32)
    exact = a.astype(np.float64) * b.astype(np.float64)
    return (product(a, b, multiplier).astype(np.float64) - exact) / exact


def stats_of(relative: np.ndarray) -> dict[str, float]:
    """mean |rel. error|, bias (mean signed rel. error) and max |rel. error| of an array of relative errors."""
    return {"mean": float(np.abs(relative).mean()), "bias": float(relative.mean()),
            "max": float(np.abs(relative).max())}


def error_stats(multiplier: str | Multiplier, count: int = OPERANDS, seed: int = SEED) -> dict[str, float]:
    """mean, bias and max relative error of `count` standard normal pairs (docs/multipliers.md's columns)."""
    return stats_of(relative_errors(multiplier, count, seed))


def has_map(multiplier: str | Multiplier) -> bool:
    """Whether the mode's error is shown as a full (Fa, Fb) map (mantissas of at most MAP_MAX_BITS bits)."""
    mode = parse(multiplier)
    return mode.mantissa_bits is not None and mode.mantissa_bits <= MAP_MAX_BITS


def error_map(multiplier: str | Multiplier) -> np.ndarray:
    """Relative error of 1.Fa x 1.Fb for every pair of m-bit mantissa fields: a [2**m, 2**m] float64 array indexed
    [Fa, Fb]. The exponents cancel out of a relative error (outside over- and underflow), so this is the error of
    every product the mode can make."""
    mode = parse(multiplier)
    if not has_map(mode):
        raise ValueError(f"{mode.name} has {mode.mantissa_bits} mantissa bits: an error map covers modes of at most "
                         f"{MAP_MAX_BITS} (2**m x 2**m pairs); use relative_errors for a sampled distribution")
    side = 1 << mode.mantissa_bits
    fields = np.arange(side, dtype=np.float64)
    operand = (1.0 + fields / side).astype(np.float32)   # exact in fp32: m <= 7 < 23 fraction bits
    a, b = np.meshgrid(operand, operand, indexing="ij")   # a[Fa, Fb] = 1.Fa, b[Fa, Fb] = 1.Fb
    exact = a.astype(np.float64) * b.astype(np.float64)
    return (product(a, b, mode).astype(np.float64) - exact) / exact


def histogram(relative: np.ndarray, bins: int = HISTOGRAM_BINS) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of the signed relative errors over [-max |rel. error|, +max]."""
    bound = float(np.abs(relative).max()) or 1e-12  # an exact mode: one bin around 0
    return np.histogram(relative, bins=bins, range=(-bound, bound))


def summary(multiplier: str | Multiplier) -> dict:
    """What one multiplier does to single products: the sampled statistics and percentiles of |rel. error|, and for
    modes with a map, the same statistics over every mantissa pair (keys "grid_mean", "grid_bias", "grid_max")."""
    mode = parse(multiplier)
    relative = relative_errors(mode)
    out: dict = {"mode": mode.name, "family": mode.family, "mantissa_bits": mode.mantissa_bits,
                 "operands": OPERANDS, "seed": SEED, **stats_of(relative)}
    magnitudes = np.abs(relative)
    out.update({f"p{p}": float(np.percentile(magnitudes, p)) for p in PERCENTILES})
    if has_map(mode):
        out.update({f"grid_{key}": value for key, value in stats_of(error_map(mode)).items()})
    return out
