"""Score a model on one benchmark: greedy decoding of every item, the benchmark's verifier, per-item records."""
from __future__ import annotations

import sys

import pandas as pd
import torch

from dataflex_rl.atomic import write_parquet
from dataflex_rl.backends.embedded.generation import decode, response_texts
from dataflex_rl.backends.embedded.model import load_model
from dataflex_rl.backends.embedded.sequences import encode_prompts
from dataflex_rl.evaluate import shards
from dataflex_rl.tasks.prompting import render_item_prompt
from dataflex_rl.verify.verifiers import get_verifier


def score_items(model, tokenizer, items: pd.DataFrame, template: str, max_new_tokens: int,
                batch_size: int = 128, temperature: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Responses and verdicts for `items`, batched by prompt length to keep padding small: greedy at temperature 0
    (the default), else sampled at `temperature` from a generator seeded with `seed` (the same items, batch size and
    seed give the same responses)."""
    generator = None if temperature == 0 else torch.Generator().manual_seed(seed)
    records = items.to_dict("records")
    prompts = encode_prompts(tokenizer, [render_item_prompt(r, template, tokenizer) for r in records])
    order = sorted(range(len(records)), key=lambda i: len(prompts[i]))
    rows: dict[int, dict] = {}
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        generated = decode(model, [prompts[i] for i in chunk], max_new_tokens=max_new_tokens,
                           eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, generator=generator,
                           temperature=temperature or 1.0)
        lengths = generated.response_mask.sum(-1).tolist()
        for index, text, length in zip(chunk, response_texts(tokenizer, generated), lengths):
            item = records[index]
            verdict = get_verifier(item["answer_format"])(text, item)
            rows[index] = {"prompt_id": item["id"], "response": text, "length": int(length),
                           "correct": bool(verdict.correct), "parsed": bool(verdict.parsed)}
    return pd.DataFrame([rows[i] for i in range(len(records))])


def score_embedded(base_dir, weights_path, items_paths: list, outputs: list, template: str, max_new_tokens: int,
                   batch_size: int = 128, threads: int = 1, temperature: float = 0.0, seed: int = 0) -> None:
    """Load the base model (and a run's trained weights when given) once, then score each benchmark's items and write
    its per-item records atomically. Each finished benchmark is first kept as a shard (`dataflex_rl.evaluate.shards`)
    that a retry of a failed job copies instead of rescoring; the shards go once every output is written."""
    torch.set_num_threads(threads)
    model, tokenizer = load_model(base_dir)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path, weights_only=True))
    model_key = shards.model_digest(base_dir, weights_path)
    settings = repr((template, max_new_tokens, batch_size) + ((temperature, seed) if temperature else ()))
    for items_path, output in zip(items_paths, outputs, strict=True):
        shard = shards.shard_path(output, model_key, shards.file_digest(items_path), settings)
        if shard.exists():
            print(f"reusing {shard}: {items_path} was scored by an earlier attempt of this job", file=sys.stderr)
        else:
            scores = score_items(model, tokenizer, pd.read_parquet(items_path), template, max_new_tokens, batch_size,
                                 temperature, seed)
            write_parquet(shard, scores)
        shards.publish(shard, output)
    for output in outputs:
        shards.remove_shards(output)
