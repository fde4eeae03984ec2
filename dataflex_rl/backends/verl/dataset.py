"""The training corpus in verl's parquet schema: one row per corpus row, in the corpus's order, so that the policy
driver's row indices (dataflex_rl.policies.driver) and `extra_info.row` name the same prompt.

The prompt is the study's `prompt_template` filled with the question, as one user message: verl renders it through the
model's chat template (data.return_raw_chat), as the embedded backend does with `render_prompt` and its tokenizer.
The reward (dataflex_rl.backends.verl.reward) rebuilds the verifier's item from `reward_model` and `extra_info`.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from dataflex_rl.artefacts.atomic import write_parquet
from dataflex_rl.regimes.noisy_rewards import noisy_reward_p
from dataflex_rl.corpus.prompting import render_prompt

VERL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info", "domain")


def verl_row(index: int, item: Mapping[str, Any], template: str) -> dict[str, Any]:
    """Corpus row number `index` (its position in the corpus parquet) as a verl row."""
    return {
        "data_source": item["source"],
        "prompt": [{"role": "user", "content": render_prompt(item["prompt"], template)}],
        "ability": item["domain"],
        "reward_model": {"style": "rule", "ground_truth": item["answer"]},
        # `question`: the raw question, which a procedural verifier hands to reasoning-gym with the answer
        "extra_info": {"row": index, "id": item["id"], "domain": item["domain"], "question": item["prompt"],
                       "answer_format": item["answer_format"], "metadata": item["metadata"],
                       "noise_p": noisy_reward_p(item)},
        "domain": item["domain"],
    }


def verl_frame(corpus: pd.DataFrame, template: str, start: int = 0) -> pd.DataFrame:
    """The rows in verl's schema, numbered from `start` (a prompt selection's own validation rows follow the
    corpus's)."""
    return pd.DataFrame([verl_row(start + index, item, template)
                         for index, item in enumerate(corpus.to_dict("records"))], columns=list(VERL_COLUMNS))


def write_verl_corpus(corpus_path, out_path, template: str) -> int:
    """Export the corpus parquet at `corpus_path` to `out_path` (atomically); returns its number of rows."""
    frame = verl_frame(pd.read_parquet(corpus_path), template)
    write_parquet(out_path, frame)
    return len(frame)
