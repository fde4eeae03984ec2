"""`noisy_rewards(fraction, p)`: round(fraction·N) prompts get a reward unrelated to the answer (GradAlign's
noisy-reward scenario: 50% of prompts with Bernoulli(0.5) rewards).

The transform only marks the prompts: their metadata gains NOISY_REWARD_KEY = p. The trainer then rewards each rollout
of a marked prompt with `noisy_reward(seed, prompt id, step, rollout, p)` instead of the verifier. That is a pure
function of its arguments (a blake2b digest, no generator state), so a resumed run draws the same rewards; and it
applies in training only: benchmark items are never marked, and scoring never reads the key.
"""
from __future__ import annotations

import hashlib
import json
from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.artefacts.items import item_metadata
from dataflex_rl.regimes.record import RECORD_COLUMNS, rows_per_domain
from dataflex_rl.regimes.shares import rounded

NOISY_REWARD_KEY = "noisy_reward_p"
_UNIT = 2.0**-53


def _bernoulli(key: list, p: float) -> float:
    """1.0 with probability p: a uniform draw from the top 53 bits of the digest of `key` (JSON)."""
    digest = hashlib.blake2b(json.dumps(key).encode(), digest_size=8).digest()
    return 1.0 if (int.from_bytes(digest, "big") >> 11) * _UNIT < p else 0.0


def noisy_reward(seed: int, prompt_id: str, step: int, rollout: int, p: float) -> float:
    """1.0 with probability p, independent of the response: drawn per (seed, prompt id, step, rollout)."""
    return _bernoulli([seed, prompt_id, step, rollout], p)


def noisy_reward_of_response(seed: int, prompt_id: str, response: str, p: float) -> float:
    """1.0 with probability p, drawn per (seed, prompt id, response text): for a trainer whose reward function sees
    neither the step nor the rollout index (verl's compute_score). The response only keys the draw, so the reward is
    still unrelated to its correctness; but the same text of the same prompt always gets the same reward, where
    `noisy_reward` draws each rollout of each step afresh."""
    return _bernoulli([seed, prompt_id, "response", response], p)


def noisy_reward_p(item: Mapping) -> float | None:
    """The Bernoulli p of a prompt the transform marked, None for every other prompt."""
    return item_metadata(item).get(NOISY_REWARD_KEY)


def noisy_rewards(corpus: pd.DataFrame, params: Mapping, rng: np.random.Generator,
                  solve_rates: Mapping[str, float] | None) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Mark round(fraction·N) prompts (half up), drawn uniformly, with p in their metadata."""
    n = rounded(params["fraction"] * len(corpus))
    marked = np.zeros(len(corpus), dtype=bool)
    marked[rng.choice(len(corpus), size=n, replace=False)] = True
    out = corpus.reset_index(drop=True).copy()
    out.loc[marked, "metadata"] = [json.dumps({**item_metadata(item), NOISY_REWARD_KEY: params["p"]}, sort_keys=True,
                                              default=str) for item in out[marked].to_dict("records")]
    record = pd.DataFrame({"id": out["id"].to_numpy(), "action": np.where(marked, "noisy_reward", "kept"),
                           "old_answer": None, "new_answer": None}, columns=list(RECORD_COLUMNS))
    return out, record, {"marked": n, "p": params["p"], "metadata_key": NOISY_REWARD_KEY,
                         "marked_per_domain": rows_per_domain(out[marked])}
