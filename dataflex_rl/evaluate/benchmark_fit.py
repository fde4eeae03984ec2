"""Whether a score job's benchmarks fit its model, checked at the job's start, where the tokenizer exists: every
item's prompt, in tokens after its template, within the benchmark prompt-token cap (by default what the positions
leave beside an answer of evaluation.max_new_tokens: what the score job's memory estimate assumes), and every gold
answer within the answer-token cap. Gates, as for the training corpus (dataflex_rl.corpus.training_fit): the items
were validated and counted when they were loaded, so an item over a cap stops the job, naming the benchmark, the
items and their lengths, rather than leaving the benchmark's denominator. Torch-free: the generator's tokenizer
counts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from dataflex_rl.corpus.prompting import render_item_prompt
from dataflex_rl.corpus.token_caps import (CappedText, TokenCaps, answer_lengths, answer_token_cap, check_token_cap,
                                          token_cap)
from dataflex_rl.corpus.validation_settings import ValidationSettings

if TYPE_CHECKING:  # the rules import this module while the DAG is built, which must not load pandas
    import pandas as pd


class BenchmarkFitError(ValueError):
    """A benchmark holds an item longer than the score job's token caps."""


BENCHMARK_PROMPTS = CappedText("data_validation.benchmarks.max_prompt_tokens", BenchmarkFitError)
BENCHMARK_ANSWERS = CappedText("data_validation.benchmarks.max_answer_tokens", BenchmarkFitError)


def benchmark_token_caps(model_key: str, model: Mapping[str, Any], max_new_tokens: int, section: ValidationSettings,
                         length_key: str = "evaluation.max_new_tokens") -> TokenCaps | None:
    """The prompt and answer caps of a score job of a model of `model` settings answering in up to `max_new_tokens`
    (the setting `length_key`: evaluation.max_new_tokens, or the model's own), configured in
    `data_validation.benchmarks` (`section`); None for a model without a built shape (verl)."""
    prompt = token_cap(BENCHMARK_PROMPTS, model_key, model, f"{length_key} {max_new_tokens}", max_new_tokens,
                       section.max_prompt_tokens)
    if prompt is None:
        return None
    return TokenCaps(prompt, answer_token_cap(BENCHMARK_ANSWERS, model_key, model, section.max_answer_tokens))


def check_benchmark_tokens(tokenizer, items: pd.DataFrame, template: str, caps: TokenCaps | None,
                           where: str) -> None:
    """Refuse the benchmark `items` (read from `where`) if an item's prompt or gold answer is over its cap."""
    if caps is None:
        return
    records = items.to_dict("records")
    ids = [record["id"] for record in records]
    prompts = [render_item_prompt(record, template, tokenizer) for record in records]
    check_token_cap(BENCHMARK_PROMPTS, ids, [len(tokenizer(p, add_special_tokens=False).input_ids) for p in prompts],
                    caps.prompt, where)
    check_token_cap(BENCHMARK_ANSWERS, ids, answer_lengths(tokenizer, [str(r["answer"]) for r in records]),
                    caps.answer, where)
