"""Equivalence verdicts: is a method better than its control, worse, within ±margin of it, or none of these?

A difference test that does not reject says nothing by itself: with 3 seeds most comparisons are wide. The two one-sided
tests (TOST) ask the converse question, whether the difference lies inside (−margin, +margin); the (1 − 2α) interval
is the one that goes with it (TOST rejects at α exactly when that interval lies inside the margin). The verdict rule
and the margin's default are documented in docs/statistics.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

VERDICTS = ("better", "worse", "equivalent", "inconclusive")


@dataclass(frozen=True)
class Tost:
    """The TOST p-value (the larger one-sided p) and the (1 − 2α) interval of the difference."""

    p_value: float
    ci_low: float
    ci_high: float


def tost(mean: float, se: float, df: float, margin: float, confidence: float) -> Tost:
    """TOST of |Δ| < `margin` at α = 1 − `confidence`, from the difference's standard error and t degrees of freedom
    (n − 1 when paired, Welch–Satterthwaite when unpaired), on the scale of `mean`.

    No spread (se 0): the difference is known exactly, so p is 0 inside the margin and 1 outside, and the interval has
    zero width. Too few seeds (se NaN): NaN throughout.
    """
    if not 0.5 < confidence < 1:
        raise ValueError(f"the TOST interval (2·confidence − 1) needs confidence in (0.5, 1), got {confidence}")
    if margin <= 0:
        raise ValueError(f"the equivalence margin must be positive, got {margin}")
    if se == 0:
        return Tost(0.0 if abs(mean) < margin else 1.0, mean, mean)
    if math.isnan(se):
        return Tost(math.nan, math.nan, math.nan)
    above_lower = float(stats.t.sf((mean + margin) / se, df))  # H0: Δ ≤ −margin
    below_upper = float(stats.t.cdf((mean - margin) / se, df))  # H0: Δ ≥ +margin
    half = float(stats.t.ppf(confidence, df)) * se  # the (1 − 2α) interval's upper quantile is 1 − α
    return Tost(max(above_lower, below_upper), mean - half, mean + half)


def verdicts(delta: pd.Series, p_difference: pd.Series, p_equivalence: pd.Series, alpha: float) -> pd.Series:
    """One of VERDICTS per comparison, from Holm-adjusted p-values of the difference test and of TOST.

    equivalent: TOST rejects (p_equivalence < alpha), whatever the difference test says — when both reject, the
    difference is detectably non-zero yet inside the margin, which the margin declares negligible. Otherwise better /
    worse: the difference test rejects (p_difference < alpha) with Δ > 0 / Δ < 0. Otherwise (including NaN p-values,
    fewer than two seeds) inconclusive.
    """
    differs = p_difference < alpha
    verdict = np.select([p_equivalence < alpha, differs & (delta > 0), differs & (delta < 0)],
                        ["equivalent", "better", "worse"], default="inconclusive")
    return pd.Series(verdict, index=delta.index, dtype=object)
