"""The draws every transform shares: its generator, largest-remainder quotas, domain-stratified samples, and a pool
that holds one group of rows at an exact share (its sizes, and half-up rounding: shares.py)."""
from __future__ import annotations

import hashlib
from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.regimes.shares import pool_sizes_at_share


def transform_rng(transform: str, seed: int) -> np.random.Generator:
    """The transform's generator: numpy's SeedSequence over the seed and a stable digest of the transform's name
    (never Python's hash(), which changes between processes)."""
    digest = hashlib.blake2b(transform.encode(), digest_size=8).digest()
    return np.random.default_rng([seed, int.from_bytes(digest, "big")])


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

    The largest such pool (shares.pool_sizes_at_share); a cut group keeps its domain shares (largest remainder)."""
    keep_target, keep_others = pool_sizes_at_share(len(target), len(others), share)
    return sample_keeping_shares(target, keep_target, rng), sample_keeping_shares(others, keep_others, rng)
