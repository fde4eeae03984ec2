"""`low_utility(share)`: the pool holds easy on-distribution prompts at `share` (GradAlign's low-utility scenario).

A SYNTHETIC STAND-IN for the paper's real-corpus case: the easy prompts are the corpus's own prompts that the untrained
base solves at least EASY_SOLVE_RATE of the time, measured by `measure_solve_rates` (K samples per prompt at the
training temperature), never assumed from the task's parameters. Each kept easy prompt's metadata gains EASY_KEY, its
measured rate, so that a run can tell them apart (a prompt selection's round metrics count them).
"""
from __future__ import annotations

import json
from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.evaluate.scoring import score_items
from dataflex_rl.artefacts.items import item_metadata
from dataflex_rl.regimes.record import kept_or_dropped, rows_per_domain
from dataflex_rl.regimes.sampling import pool_at_share

EASY_SOLVE_RATE = 0.9
# The metadata key of a kept easy prompt: its measured solve rate (what a prompt selection's round metrics count).
EASY_KEY = "low_utility_solve_rate"
STAND_IN = "synthetic stand-in for the paper's real-corpus low-utility case: the corpus's own prompts that the " \
           "untrained base solves >= 90% of the time, measured"


def measure_solve_rates(generator, items: pd.DataFrame, template: str, *, samples: int, temperature: float,
                        max_new_tokens: int, batch_size: int = 128, seed: int = 0,
                        workers: int = 1) -> dict[str, float]:
    """prompt id -> the fraction of `samples` sampled answers (at `temperature`, draws seeded by `seed`) that the
    item's verifier accepts; `generator` is a backend's (dataflex_rl.backends.base.Generator), e.g. the untrained
    base opened with `open_generator`, which draws the samples of a prompt independently (Generator.generate).
    `workers`: the processes that verify the answers where there are thousands (score_items)."""
    scores = score_items(generator, items, template, max_new_tokens=max_new_tokens, batch_size=batch_size,
                         temperature=temperature, seed=seed, samples=samples, workers=workers)
    return {str(prompt_id): float(rate) for prompt_id, rate in scores.groupby("prompt_id")["correct"].mean().items()}


def is_easy(item: Mapping) -> bool:
    """Whether the transform kept `item` as one of its easy prompts."""
    return EASY_KEY in item_metadata(item)


def low_utility(corpus: pd.DataFrame, params: Mapping, rng: np.random.Generator,
                solve_rates: Mapping[str, float] | None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The largest pool with the easy prompts (measured rate >= EASY_SOLVE_RATE) at `share` (sampling.pool_at_share);
    prompts without a measured rate count as not easy."""
    if solve_rates is None:
        raise ValueError("regime low_utility: no measured solve rates; the transform picks the prompts the untrained "
                         "base solves >= 90% of the time, so measure them first (dataflex_rl.regimes.low_utility."
                         "measure_solve_rates) and pass them as solve_rates")
    easy = corpus["id"].map(lambda prompt_id: solve_rates.get(prompt_id, 0.0) >= EASY_SOLVE_RATE).astype(bool)
    if params["share"] > 0 and not easy.any():
        raise ValueError(f"regime low_utility: none of the {len(corpus)} prompts has a measured solve rate >= "
                         f"{EASY_SOLVE_RATE} ({len(solve_rates)} measured); the pool cannot hold easy prompts at "
                         f"share {params['share']} — measure more prompts or use a stronger base model")
    kept_easy, kept_others = pool_at_share(corpus[easy], corpus[~easy], params["share"], rng)
    marked = corpus.copy()
    marked.loc[kept_easy, "metadata"] = [
        json.dumps({**item_metadata(item), EASY_KEY: solve_rates[item["id"]]}, sort_keys=True, default=str)
        for item in corpus.loc[kept_easy].to_dict("records")]
    out, record = kept_or_dropped(marked, kept_easy.append(kept_others))
    record.loc[record["id"].isin(corpus.loc[kept_easy, "id"]), "action"] = "kept_easy"
    return out, record, {"easy_threshold": EASY_SOLVE_RATE, "easy_available": int(easy.sum()),
                         "easy_rows": len(kept_easy), "other_rows": len(kept_others),
                         "rows_per_domain": rows_per_domain(out), "note": STAND_IN}
