"""`unbalanced(target_domain, share)`: the training pool holds the target domain at `share`; a prompt selection's
validation prompts come from the target domain only, and its score is the test score (GradAlign's unbalanced-pool
scenario: the target ≈12% of the pool)."""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.regimes.record import kept_or_dropped, rows_per_domain
from dataflex_rl.regimes.sampling import pool_at_share


def unbalanced(corpus: pd.DataFrame, params: Mapping, rng: np.random.Generator,
               solve_rates: Mapping[str, float] | None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The largest pool with the target domain at `share` (sampling.pool_at_share): the other domains stay whole
    and target rows are dropped, or, when the target domain has too few rows, every target row stays and the other
    domains are cut, keeping their shares of one another. The audit's `evaluation_domain` names the domain the
    validation prompts and the test score come from."""
    is_target = corpus["domain"] == params["target_domain"]
    kept_target, kept_others = pool_at_share(corpus[is_target], corpus[~is_target], params["share"], rng)
    out, record = kept_or_dropped(corpus, kept_target.append(kept_others))
    return out, record, {"evaluation_domain": params["target_domain"], "target_rows": len(kept_target),
                         "other_rows": len(kept_others), "rows_per_domain": rows_per_domain(out)}
