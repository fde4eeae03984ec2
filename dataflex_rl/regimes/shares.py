"""The row counts of a pool that holds one group of rows at an exact share — pure Python, so that the dry run can
ask what a regime keeps without pandas (`sampling.pool_at_share` draws the rows)."""
from __future__ import annotations

import math


def rounded(x: float) -> int:
    """x rounded half up (Python's round() rounds half to even: round(2.5) == 2)."""
    return math.floor(x + 0.5)


def pool_sizes_at_share(n_target: int, n_others: int, share: float) -> tuple[int, int]:
    """How many of `n_target` and of `n_others` rows make the largest pool holding the target rows at `share`: when
    there are enough target rows, every other row stays and round(share·O / (1 − share)) target rows join them;
    otherwise every target row stays and the others are cut to round(T·(1 − share) / share)."""
    if share >= 1:
        return n_target, 0
    if share <= 0:
        return 0, n_others
    if rounded(share * n_others / (1 - share)) <= n_target:
        return rounded(share * n_others / (1 - share)), n_others
    return n_target, min(n_others, rounded(n_target * (1 - share) / share))
