"""Build the embedded "untrained" base model once per model: tokenizer, ~1M-parameter Qwen2, supervised warm-up."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch

from dataflex_rl.backends.embedded.model import build_model, save_model, train_tokenizer
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.backends.embedded.sequences import encode_prompts
from dataflex_rl.backends.embedded.warmup import supervised_warmup
from dataflex_rl.corpus.prompting import render_prompt, render_target
from dataflex_rl.corpus.token_caps import TokenCaps, answer_lengths, check_token_cap
from dataflex_rl.corpus.training_fit import TRAINING_ANSWERS, TRAINING_PROMPTS


def build_base_model(corpus_path, out_dir, shape: ModelShape, warmup: WarmupSettings, template: str,
                     threads: int = 1, progress: bool = True, token_caps: TokenCaps | None = None) -> None:
    """Write the base model into `out_dir` (the job makes it appear atomically: dataflex_rl.study.jobs). A corpus prompt
    longer than `token_caps.prompt` tokens, or a gold answer longer than `token_caps.answer`
    (dataflex_rl.corpus.training_fit), is
    refused as soon as the tokenizer exists, before the warm-up trains on it."""
    torch.set_num_threads(threads)
    corpus = pd.read_parquet(corpus_path)
    texts = [render_prompt(q, template) + render_target(a) for q, a in zip(corpus["prompt"], corpus["answer"])]
    tokenizer = train_tokenizer(texts, shape.vocab_size)
    prompts = encode_prompts(tokenizer, [render_prompt(q, template, tokenizer) for q in corpus["prompt"]])
    if token_caps is not None:
        check_token_cap(TRAINING_PROMPTS, list(corpus["id"]), [len(p) for p in prompts], token_caps.prompt,
                        str(corpus_path))
        check_token_cap(TRAINING_ANSWERS, list(corpus["id"]), answer_lengths(tokenizer, list(corpus["answer"])),
                        token_caps.answer, str(corpus_path))
    model = build_model(shape, tokenizer, warmup.seed)
    losses = supervised_warmup(model, tokenizer, corpus, warmup, template, progress=progress)
    save_model(model, tokenizer, out_dir)
    (Path(out_dir) / "warmup_loss.json").write_text(json.dumps({"first": losses[0], "last": losses[-1],
                                                                "steps": len(losses)}))
