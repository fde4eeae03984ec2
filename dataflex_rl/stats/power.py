"""Power of the two-sided paired t test: the one computation behind both the minimum detectable effect the tables
report after a study (`seeds.detectable_effects`) and the one the dry run plans with before it (study.power_plan).

A paired comparison over n matched seeds tests the mean of n per-seed differences with n − 1 degrees of freedom; for a
true mean difference δ and an SD σ of the differences its statistic follows a noncentral t with noncentrality
δ·√n/σ (scipy.stats.nct), so power depends on δ/σ and n only. The minimum detectable effect (MDE) is the δ at which
the power is the asked one; the seeds needed for a target δ are the fewest n whose MDE is at most δ.
"""
from __future__ import annotations

import functools
import math
import warnings
from typing import Callable

import numpy as np

# (n, power, alpha) → the MDE in SDs: `standardised_mde`, or a dry run's remembered values of it
# (dataflex_rl.study.mde_cache)
Standardised = Callable[[int, float, float], float]


def paired_t_power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided one-sample (paired) t test at level alpha for a true mean `effect` and SD `sd`."""
    if n < 2 or not sd > 0:
        return math.nan
    from scipy import stats  # here: a dry run that remembers its roots plans without importing scipy.stats

    df = n - 1
    critical = stats.t.ppf(1 - alpha / 2, df)
    nc = effect / sd * math.sqrt(n)
    # scipy's nct returns NaN for a far tail that has underflowed; that tail is ~0, not unknown.
    upper, lower = (float(np.nan_to_num(x, nan=0.0)) for x in (stats.nct.sf(critical, df, abs(nc)),
                                                             stats.nct.cdf(-critical, df, abs(nc))))
    return upper + lower


@functools.lru_cache(maxsize=None)
def standardised_mde(n: int, power: float, alpha: float) -> float:
    """MDE in SD units: power depends on effect / sd only, so one root per (n, power, alpha) serves every table row."""
    from scipy import optimize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upper = 1.0
        while paired_t_power(upper, 1.0, n, alpha) < power:
            upper *= 2
        return float(optimize.brentq(lambda e: paired_t_power(e, 1.0, n, alpha) - power, 0.0, upper, xtol=1e-13))


def minimum_detectable_effect(sd: float, n: int, power: float = 0.8, alpha: float = 0.05,
                              standardised: Standardised = standardised_mde) -> float:
    """Smallest true mean paired difference detected with `power` by a two-sided paired t test with n pairs (NaN
    without a spread to scale: n < 2, or sd zero or not finite)."""
    if n < 2 or not sd > 0 or not math.isfinite(sd):
        return math.nan
    return sd * standardised(int(n), float(power), float(alpha))


def seeds_needed(target: float, sd: float, power: float = 0.8, alpha: float = 0.05,
                 standardised: Standardised = standardised_mde) -> int | None:
    """The fewest matched seeds (at least 2) whose `minimum_detectable_effect` is at most `target`; None without a
    spread to scale. The MDE falls as n grows, so the count is bracketed by doubling and then bisected."""
    if not target > 0 or not sd > 0 or not math.isfinite(sd):
        return None
    def reaches(n: int) -> bool:
        return minimum_detectable_effect(sd, n, power, alpha, standardised) <= target
    if reaches(2):
        return 2
    low, high = 2, 4
    while not reaches(high):
        low, high = high, 2 * high
    while high - low > 1:  # low misses the target, high reaches it
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high
