"""Token bookkeeping shared by warm-up, GRPO and scoring: per-token log-probabilities of responses.

The K rollouts of a prompt share its prefix, so the prompt is run once per group and its KV cache is repeated K times
(`repeats`): the forward and backward passes then cost G·P + G·K·L tokens instead of G·K·(P + L).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


@dataclass(frozen=True)
class Prefix:
    """Left-padded prompts run once through a model: their last-position logits and KV cache, one row per prompt.

    A GRPO step samples its rollouts from the policy's prefix and continues the policy's training forward from the
    same one (autograd kept), so the policy runs each prompt once a step; the values are those of two separate runs,
    bit for bit (the same inputs, shapes and weights, and no dropout in the model)."""
    prompt_ids: torch.Tensor  # [B, P]
    prompt_mask: torch.Tensor  # [B, P]
    logits: torch.Tensor  # [B, V]
    cache: DynamicCache

    def repeated(self, repeats: int, detach: bool = False) -> tuple[torch.Tensor, DynamicCache, torch.Tensor]:
        """(last-position logits, a fresh cache, attention mask), each repeated `repeats`× (the K rollouts of a prompt);
        `detach`: cut from the prefill's autograd graph, for sampling. The prefix's own cache is never extended."""
        cache = DynamicCache()
        for index, layer in enumerate(self.cache.layers):
            keys, values = (layer.keys.detach(), layer.values.detach()) if detach else (layer.keys, layer.values)
            cache.update(keys.repeat_interleave(repeats, dim=0), values.repeat_interleave(repeats, dim=0), index)
        logits = self.logits.detach() if detach else self.logits
        return (logits.repeat_interleave(repeats, dim=0), cache,
                self.prompt_mask.repeat_interleave(repeats, dim=0))


def prefill(model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> Prefix:
    cache = DynamicCache()
    logits = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions_from_mask(prompt_mask),
                   past_key_values=cache, use_cache=True).logits[:, -1, :]
    return Prefix(prompt_ids, prompt_mask, logits, cache)


def continuation_logprobs(model, prefix: Prefix, response_ids, response_mask, repeats: int = 1) -> torch.Tensor:
    """log π(response token | prefix), [B·repeats, L], for responses right-padded [B·repeats, L] after `prefix`."""
    first_logits, cache, attention = prefix.repeated(repeats)
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


def response_logprobs(model, prompt_ids, prompt_mask, response_ids, response_mask, repeats: int = 1) -> torch.Tensor:
    """log π(response token | prefix), [B·repeats, L]; prompts left-padded [B, P], responses right-padded [B·repeats, L]."""
    return continuation_logprobs(model, prefill(model, prompt_ids, prompt_mask), response_ids, response_mask, repeats)


def encode_prompts(tokenizer, prompts: list[str]) -> list[list[int]]:
    return [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
