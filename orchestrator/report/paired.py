"""A multiplier against its baseline over seeds: the paired difference of final test accuracy, seed by seed, with
its Student t confidence interval.

Two cells are paired only over the seeds both have finished: a seed's two runs share their initial weights and data
order, so the difference of a pair holds the multiplier's effect without the seed's. The interval is
mean ± t(0.975, n - 1) · s / √n of the n differences (s their sample standard deviation): two-sided 95 %, and none
below two pairs.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Mapping

CONFIDENCE = 0.95
METHOD = "paired Student t, 95 % two-sided, over the seeds both cells finished"


@dataclass(frozen=True)
class Paired:
    seeds: tuple[str, ...]            # the shared finished seeds, in order
    differences: tuple[float, ...]    # cell minus baseline, per seed (fractions of 1, as the accuracies)
    mean: float
    std: float                        # NaN below two pairs
    low: float                        # the interval's bounds, NaN below two pairs
    high: float

    @property
    def n(self) -> int:
        return len(self.seeds)


def t_quantile(probability: float, degrees: int) -> float:
    """The Student t distribution's quantile. scipy comes with scikit-learn, a dependency of the project; its
    special functions (0.3 s to import) rather than scipy.stats (0.9 s), imported only where an interval is made:
    the report of a 1000-cell grid has a 5 s budget (docs/tracking.md)."""
    from scipy.special import stdtrit

    return float(stdtrit(degrees, probability))


def _seed_order(seed: str) -> tuple:
    return (0, int(seed), "") if seed.lstrip("-").isdigit() else (1, 0, seed)


def paired(cell: Mapping[str, float], baseline: Mapping[str, float]) -> Paired | None:
    """The comparison of two cells given as {seed: final test accuracy} of their finished runs; None without a
    shared seed."""
    seeds = tuple(sorted(cell.keys() & baseline.keys(), key=_seed_order))
    if not seeds:
        return None
    differences = tuple(cell[s] - baseline[s] for s in seeds)
    mean = statistics.fmean(differences)
    if len(seeds) < 2:
        return Paired(seeds, differences, mean, math.nan, math.nan, math.nan)
    std = statistics.stdev(differences)
    half = t_quantile(0.5 + CONFIDENCE / 2, len(seeds) - 1) * std / math.sqrt(len(seeds))
    return Paired(seeds, differences, mean, std, mean - half, mean + half)


def points_text(p: Paired) -> str:
    """`+1.23 pp [+0.40, +2.06] (n=3)`: the mean difference and its interval in percentage points."""
    text = f"{100 * p.mean:+.2f} pp"
    if math.isfinite(p.low):
        text += f" [{100 * p.low:+.2f}, {100 * p.high:+.2f}]"
    return f"{text} (n={p.n})"
