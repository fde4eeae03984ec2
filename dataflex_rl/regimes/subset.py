"""`subset(fraction, keep_domain_shares)`: a seeded subset of exactly round(fraction·N) prompts (the seed paper's 25%
data subset)."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.regimes.record import kept_or_dropped, rows_per_domain
from dataflex_rl.regimes.sampling import sample_keeping_shares
from dataflex_rl.regimes.shares import rounded


def subset(corpus: pd.DataFrame, params: Mapping, rng: np.random.Generator,
           solve_rates: Mapping[str, float] | None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """round(fraction·N) rows (half up); with keep_domain_shares each domain keeps its largest-remainder share of
    them, else they are drawn uniformly from the whole corpus."""
    n = rounded(params["fraction"] * len(corpus))
    if params["keep_domain_shares"]:
        kept = sample_keeping_shares(corpus, n, rng)
    else:
        kept = pd.Index(sorted(rng.choice(corpus.index.to_numpy(), size=n, replace=False)))
    out, record = kept_or_dropped(corpus, kept)
    return out, record, {"kept": len(out), "dropped": len(corpus) - len(out), "rows_per_domain": rows_per_domain(out)}
