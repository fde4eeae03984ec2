"""The draws every transform shares: its generator, half-up rounding, largest-remainder quotas, domain-stratified
samples, and a pool that holds one group of rows at an exact share."""
from __future__ import annotations

import hashlib
import math
from typing import Mapping

import numpy as np
import pandas as pd


def transform_rng(transform: str, seed: int) -> np.random.Generator:
    """The transform's generator: numpy's SeedSequence over the seed and a stable digest of the transform's name
    (never Python's hash(), which changes between processes)."""
    digest = hashlib.blake2b(transform.encode(), digest_size=8).digest()
    return np.random.default_rng([seed, int.from_bytes(digest, "big")])


def rounded(x: float) -> int:
    """x rounded half up (Python's round() rounds half to even: round(2.5) == 2)."""
    return math.floor(x + 0.5)


def largest_remainder(counts: Mapping[str, int], total: int) -> dict[str, int]:
    """Split `total` over the keys in proportion to `counts` (Hamilton's method): each key gets the floor of its exact
    quota, and the rows left over go to the largest fractional parts, ties to the earlier key in sorted order."""
    whole = sum(counts.values())
    if whole == 0:
        return {key: 0 for key in counts}
    quotas = {key: total * n // whole for key, n in counts.items()}
    left = total - sum(quotas.values())
    by_remainder = sorted(counts, key=lambda key: (-(total * counts[key] % whole), key))
    for key in by_remainder[:left]:
        quotas[key] += 1
    return quotas


def sample_keeping_shares(rows: pd.DataFrame, n: int, rng: np.random.Generator, by: str = "domain") -> pd.Index:
    """The index labels of `n` of `rows`, each value of column `by` holding its largest-remainder share of `n`."""
    counts = rows[by].value_counts().sort_index()
    quotas = largest_remainder({key: int(count) for key, count in counts.items()}, n)
    picked = [label for key, quota in sorted(quotas.items())
              for label in rng.choice(rows.index[rows[by] == key].to_numpy(), size=quota, replace=False)]
    return pd.Index(sorted(picked))


def pool_at_share(target: pd.DataFrame, others: pd.DataFrame, share: float,
                  rng: np.random.Generator) -> tuple[pd.Index, pd.Index]:
    """The index labels of the rows of `target` and of `others` that make a pool holding `target` rows at `share`.

    The largest such pool: when there are enough target rows, every other row stays and round(share·O / (1 − share))
    target rows join them; otherwise every target row stays and the others are cut to round(T·(1 − share) / share).
    A cut group keeps its domain shares (largest remainder)."""
    n_target, n_others = len(target), len(others)
    if share >= 1:
        keep_target, keep_others = n_target, 0
    elif share <= 0:
        keep_target, keep_others = 0, n_others
    elif rounded(share * n_others / (1 - share)) <= n_target:
        keep_target, keep_others = rounded(share * n_others / (1 - share)), n_others
    else:
        keep_target, keep_others = n_target, min(n_others, rounded(n_target * (1 - share) / share))
    return sample_keeping_shares(target, keep_target, rng), sample_keeping_shares(others, keep_others, rng)
