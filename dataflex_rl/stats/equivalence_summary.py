"""The paper's question per method family: at the configured margin, how many of a family's methods are better than
their controls, worse, equivalent or inconclusive; and from which margin on would every one of them be declared
equivalent (docs/statistics.md: the paper's question).

The margin is the comparisons' own rule taken further: the same TOST p-values under the row's pairing, the same Holm
family (every method of one (model, summary), whatever its method family), the same verdicts() order, in which
"equivalent" comes first — so a `better` or `worse` method counts too: at a wide enough margin its TOST rejects.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from dataflex_rl.stats.equivalence import VERDICTS

SUMMARY_COLUMNS = ["model", "metric", "family", "methods", *VERDICTS, "margin", "all_equivalent_margin"]


def tost_rejection_margin(delta: np.ndarray, se: np.ndarray, df: np.ndarray, level) -> np.ndarray:
    """The margin above which TOST's p-value falls below `level`: |Δ| + t(1 − level; df)·se, the end of the
    (1 − 2·level) interval farthest from 0 (p < level exactly when both one-sided tests reject at `level`). With no
    spread, |Δ|: tost() is exact there (p 0 inside the margin, 1 outside)."""
    quantile = np.where(se == 0, 0.0, stats.t.ppf(1 - np.asarray(level), df))
    return np.abs(delta) + quantile * se


def all_equivalent_margin(delta, se, df, tested, members, alpha: float) -> float:
    """The margin m* (points) such that at every margin above it, and at none up to it, the Holm-adjusted TOST rejects
    at `alpha` for every comparison in `members`: where verdicts() says "equivalent" for each of them. The arrays are
    one Holm family (the methods of one (model, summary)); `tested`: the rows with a TOST p-value (Holm's M counts
    only those); NaN where a member has none (fewer than two seeds).

    Exact, from Holm's thresholds c_l = α / (M − l + 1). With m_h(c) the margin above which p_h < c, the l-th smallest
    p is below c_l exactly when l comparisons have p < c_l, i.e. m > μ_l, the l-th smallest m_h(c_l). So Holm rejects at
    least the first k above T_k = max(μ_1..μ_k), with thresholds then at least c_k, which every member passes above
    G_k = max over members of m_h(c_k); conversely, where R are rejected, m > T_R and m > G_R. Hence
    m* = min over k of max(T_k, G_k).
    """
    delta, se, df = (np.asarray(x, dtype=float) for x in (delta, se, df))
    tested, members = np.asarray(tested, dtype=bool), np.asarray(members, dtype=bool)
    if not tested[members].all():
        return float("nan")
    delta, se, df, members = delta[tested], se[tested], df[tested], members[tested]
    m = len(delta)
    levels = alpha / (m - np.arange(m))  # c_1 ≤ … ≤ c_M
    margins = tost_rejection_margin(delta, se, df, levels[:, None])  # [level l, comparison h]
    step_down = np.maximum.accumulate(np.sort(margins, axis=1)[np.arange(m), np.arange(m)])  # T_k
    passed = margins[:, members].max(axis=1)  # G_k
    return float(np.min(np.maximum(step_down, passed)))


def equivalence_summary(comparisons: pd.DataFrame, families: Mapping[str, str], alpha: float) -> pd.DataFrame:
    """One row per (model, metric, method family) of `comparisons` (compare_methods(..., spread=True), every summary),
    in their order: the family's methods, how many have each verdict at the table's `margin`, and
    `all_equivalent_margin`. `families` maps each compared method to its family."""
    unknown = sorted(set(comparisons["method"]) - set(families))
    if unknown:
        raise ValueError(f"no method family for {unknown}: pass `families` (method → its policy's family)")
    rows = []
    for (model, metric), block in comparisons.groupby(["model", "metric"], sort=False):
        family = block["method"].map(families)
        for name in pd.unique(family):
            members = (family == name).to_numpy()
            counts = block.loc[members, "verdict"].value_counts()
            rows.append({"model": model, "metric": metric, "family": name,
                         "methods": ", ".join(block.loc[members, "method"]),
                         **{verdict: int(counts.get(verdict, 0)) for verdict in VERDICTS},
                         "margin": block["margin"].iloc[0],
                         "all_equivalent_margin": all_equivalent_margin(block["delta_mean"], block["se"], block["df"],
                                                                        block["p_tost"].notna(), members, alpha)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
