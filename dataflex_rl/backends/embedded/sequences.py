"""Token bookkeeping shared by warm-up, GRPO and scoring: per-token log-probabilities of responses.

The K rollouts of a prompt share its prefix, so the prompt is run once per group and its KV cache is repeated K times
(`repeats`): the forward and backward passes then cost G·P + G·K·L tokens instead of G·K·(P + L).
"""
from __future__ import annotations

import torch
from transformers import DynamicCache


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def prefill(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, repeats: int = 1):
    """Run left-padded prompts once; return (last-position logits, cache, attention mask), each repeated `repeats`×."""
    cache = DynamicCache()
    logits = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions_from_mask(prompt_mask),
                   past_key_values=cache, use_cache=True).logits[:, -1, :]
    if repeats > 1:
        cache.batch_repeat_interleave(repeats)
        logits = logits.repeat_interleave(repeats, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(repeats, dim=0)
    return logits, cache, prompt_mask


def response_logprobs(model, prompt_ids, prompt_mask, response_ids, response_mask, repeats: int = 1) -> torch.Tensor:
    """log π(response token | prefix), [B·repeats, L]; prompts left-padded [B, P], responses right-padded [B·repeats, L]."""
    first_logits, cache, attention = prefill(model, prompt_ids, prompt_mask, repeats)
    next_position = positions_from_mask(attention)[:, -1:] + 1
    logits = first_logits[:, None, :]
    if response_ids.shape[1] > 1:
        steps = response_ids.shape[1] - 1
        full_mask = torch.cat([attention, response_mask[:, :steps]], dim=1)
        positions = next_position + torch.arange(steps)[None, :]
        rest = model(input_ids=response_ids[:, :steps], attention_mask=full_mask, position_ids=positions,
                     past_key_values=cache, use_cache=True).logits
        logits = torch.cat([logits, rest], dim=1)
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, response_ids[..., None]).squeeze(-1) * response_mask


def encode_prompts(tokenizer, prompts: list[str]) -> list[list[int]]:
    return [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
