"""Score a model on benchmarks: render every item's prompt, have the backend's generator answer, apply the
benchmark's verifier, and write per-item records. Backend-neutral: the generator is any
`dataflex_rl.backends.base.Generator`."""
from __future__ import annotations

import sys

import pandas as pd

from dataflex_rl.artefacts.atomic import write_parquet
from dataflex_rl.evaluate import shards
from dataflex_rl.evaluate.benchmark_fit import check_benchmark_tokens
from dataflex_rl.corpus.prompting import render_item_prompt
from dataflex_rl.corpus.token_caps import TokenCaps
from dataflex_rl.verify.processes import in_processes
from dataflex_rl.verify.verifiers import get_verifier


def verdict(answer: tuple[str, dict]) -> tuple[bool, bool]:
    """(correct, parsed): the verdict of the item's verifier on one (answer text, item)."""
    text, item = answer
    found = get_verifier(item["answer_format"])(text, item)
    return bool(found.correct), bool(found.parsed)


def score_items(generator, items: pd.DataFrame, template: str, *, max_new_tokens: int, batch_size: int = 128,
                temperature: float = 0.0, seed: int = 0, samples: int = 1, workers: int = 1) -> pd.DataFrame:
    """Responses and verdicts for `items`: greedy at temperature 0 (the default), else sampled at `temperature` with
    draws seeded by `seed`, `samples` answers per item (a row each, sample-major: all items' first samples, then
    their second, ...); what the generator's engine reports per answer (Answer.engine) follows as more columns.
    The verdicts are the same, in the same order, however many `workers` verify them (verify.processes: in
    processes from a few thousand answers on, a solve-rate part's 16,384 say; in this one below)."""
    records = items.to_dict("records")
    prompts = [render_item_prompt(record, template, generator.tokenizer) for record in records]
    answers = generator.generate(prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                                 temperature=temperature, seed=seed, samples=samples)
    pairs = list(zip((answer.text for answer in answers), records * samples, strict=True))
    verdicts = in_processes(verdict, pairs, workers=workers)
    return pd.DataFrame([{"prompt_id": item["id"], "response": answer.text, "length": answer.length,
                          "correct": correct, "parsed": parsed, **answer.engine}
                         for (_, item), answer, (correct, parsed) in zip(pairs, answers, verdicts, strict=True)])


def score_benchmarks(generator, items_paths: list, outputs: list, shard_keys: list[str], template: str,
                     evaluation: dict, token_caps: TokenCaps | None = None, workers: int = 1) -> None:
    """Score each benchmark's items with the one loaded model and write its per-item records atomically. First every
    benchmark is checked against the job's `token_caps` (dataflex_rl.evaluate.benchmark_fit), so that an over-long
    item stops the job before it scores anything. Each finished benchmark is then kept as a shard
    (`dataflex_rl.evaluate.shards`) under its key (the state key of its settings and inputs) that a retry of a failed
    job copies instead of rescoring; the shards go once every output is written. `workers`: the job's CPUs, which
    verify a large benchmark's answers (score_items)."""
    for items_path in items_paths:
        check_benchmark_tokens(generator.tokenizer, pd.read_parquet(items_path), template, token_caps, items_path)
    for items_path, output, key in zip(items_paths, outputs, shard_keys, strict=True):
        shard = shards.shard_path(output, key)
        if shard.exists():
            print(f"reusing {shard}: {items_path} was scored by an earlier attempt of this job", file=sys.stderr)
        else:
            scores = score_items(generator, pd.read_parquet(items_path), template,
                                 max_new_tokens=evaluation["max_new_tokens"], batch_size=evaluation["batch_size"],
                                 temperature=evaluation["temperature"], seed=evaluation.get("seed", 0),
                                 workers=workers)
            write_parquet(shard, scores)
        shards.publish(shard, output)
    for output in outputs:
        shards.remove_shards(output)
