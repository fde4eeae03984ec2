"""Supervised warm-up of the tiny base model, so that GRPO starts from mixed (not all-zero) reward groups.

Loss on the answer tokens and end-of-text only; batches drawn with a seeded RNG; AdamW with linear decay.
"""
from __future__ import annotations

import random

import pandas as pd
import torch
from tqdm import tqdm

from dataflex_rl.backends.embedded.generation import left_pad
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.backends.embedded.sequences import encode_prompts, response_logprobs
from dataflex_rl.corpus.prompting import render_prompt, render_target


def right_pad(sequences: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        mask[row, : len(seq)] = 1
    return ids, mask


def supervised_warmup(model, tokenizer, corpus: pd.DataFrame, settings: WarmupSettings, template: str,
                      progress: bool = True) -> list[float]:
    """Train `model` in place on (prompt → gold answer) pairs; return the loss per step."""
    prompts = encode_prompts(tokenizer, [render_prompt(q, template) for q in corpus["prompt"]])
    targets = [tokenizer(render_target(a), add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
               for a in corpus["answer"]]
    rng = random.Random(f"warmup:{settings.seed}")
    optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: 1.0 - step / settings.steps)
    model.train()
    losses = []
    for _ in tqdm(range(settings.steps), desc="warm-up", disable=not progress, mininterval=5):
        rows = [rng.randrange(len(prompts)) for _ in range(settings.batch_size)]
        prompt_ids, prompt_mask = left_pad([prompts[r] for r in rows], tokenizer.pad_token_id)
        target_ids, target_mask = right_pad([targets[r] for r in rows], tokenizer.pad_token_id)
        logp = response_logprobs(model, prompt_ids, prompt_mask, target_ids, target_mask)
        loss = -(logp.sum() / target_mask.sum())
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        losses.append(loss.item())
    model.eval()
    return losses
