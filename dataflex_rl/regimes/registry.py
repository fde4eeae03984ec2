"""The one entry point that runs a regime transform: `apply_regime` (the parameters and checks are in
dataflex_rl.regimes.catalogue)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import pandas as pd

from dataflex_rl.artefacts.items import CORPUS_COLUMNS
from dataflex_rl.regimes.catalogue import REGIMES, regime_errors
from dataflex_rl.regimes.label_noise import label_noise
from dataflex_rl.regimes.low_utility import low_utility
from dataflex_rl.regimes.noisy_rewards import noisy_rewards
from dataflex_rl.regimes.record import RECORD_COLUMNS, rows_per_domain
from dataflex_rl.regimes.sampling import transform_rng
from dataflex_rl.regimes.subset import subset
from dataflex_rl.regimes.unbalanced import unbalanced

Transform = Callable[..., tuple[pd.DataFrame, pd.DataFrame, dict]]
TRANSFORMS: dict[str, Transform] = {"label_noise": label_noise, "subset": subset, "noisy_rewards": noisy_rewards,
                                    "unbalanced": unbalanced, "low_utility": low_utility}

def apply_regime(transform: str, params: Mapping[str, Any], corpus: pd.DataFrame, seed: int, *,
                 solve_rates: Mapping[str, float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The transformed corpus (CORPUS_COLUMNS), the per-prompt record (RECORD_COLUMNS: one row per input prompt) and
    the audit (JSON-able counts). The same (transform, params, corpus, seed, solve_rates) give identical outputs."""
    errors = regime_errors(transform, params, sorted(corpus["domain"].unique()))
    if errors:
        raise ValueError(f"regime {transform}: " + "; ".join(errors))
    spec = REGIMES[transform]
    resolved = spec.with_defaults(params)
    out, record, counts = TRANSFORMS[transform](corpus[list(CORPUS_COLUMNS)].reset_index(drop=True), resolved,
                                                transform_rng(transform, seed), solve_rates)
    audit = {"transform": transform, "params": resolved, "seed": seed, "rows_in": len(corpus), "rows_out": len(out),
             "rows_per_domain_in": rows_per_domain(corpus), **counts}
    return out[list(CORPUS_COLUMNS)], record[list(RECORD_COLUMNS)], audit
