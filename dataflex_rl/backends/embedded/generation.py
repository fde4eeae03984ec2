"""Batched autoregressive decoding with a KV cache: seeded sampling for rollouts, argmax for greedy evaluation.

A hand-written loop rather than `generate()`: the sampling draws come from an explicit `torch.Generator`, so a run's
rollouts depend only on its seed and checkpointed generator state; and the K rollouts of a prompt share one prefill.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from dataflex_rl.backends.base import Answer
from dataflex_rl.backends.embedded.sequences import Prefix, positions_from_mask, prefill


@dataclass(frozen=True)
class Generated:
    prompt_ids: torch.Tensor  # [B, P] left-padded, one row per distinct prompt
    prompt_mask: torch.Tensor  # [B, P]
    response_ids: torch.Tensor  # [B·repeats, L] right-padded with pad_id after end-of-text
    response_mask: torch.Tensor  # [B·repeats, L] 1 for generated tokens up to and including end-of-text


def left_pad(sequences: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        ids[row, width - len(seq):] = torch.tensor(seq, dtype=torch.long)
        mask[row, width - len(seq):] = 1
    return ids, mask


@torch.no_grad()
def decode(model, prompts: list[list[int]], *, max_new_tokens: int, eos_id: int, pad_id: int, repeats: int = 1,
           generator: torch.Generator | None = None, temperature: float = 1.0) -> Generated:
    """`repeats` responses per prompt of up to `max_new_tokens`: sampled with `generator`, or greedy when it is None."""
    return decode_from(model, prefill(model, *left_pad(prompts, pad_id)), max_new_tokens=max_new_tokens,
                       eos_id=eos_id, pad_id=pad_id, repeats=repeats, generator=generator, temperature=temperature)


@torch.no_grad()
def decode_from(model, prefix: Prefix, *, max_new_tokens: int, eos_id: int, pad_id: int, repeats: int = 1,
                generator: torch.Generator | None = None, temperature: float = 1.0) -> Generated:
    """`decode` continuing from prompts already run through `model` (`prefix`, left-padded with `pad_id`)."""
    logits, cache, attention = prefix.repeated(repeats, detach=True)
    batch = attention.shape[0]
    next_position = positions_from_mask(attention)[:, -1] + 1
    finished = torch.zeros(batch, dtype=torch.bool)
    out_ids = torch.full((batch, max_new_tokens), pad_id, dtype=torch.long)
    out_mask = torch.zeros((batch, max_new_tokens), dtype=torch.long)
    for step in range(max_new_tokens):
        if generator is None:
            token = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float() / temperature, dim=-1)
            token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        token = torch.where(finished, torch.full_like(token, pad_id), token)
        out_ids[:, step] = token
        out_mask[:, step] = (~finished).long()
        finished |= token == eos_id
        if bool(finished.all()) or step + 1 == max_new_tokens:
            break
        attention = torch.cat([attention, torch.ones((batch, 1), dtype=attention.dtype)], dim=1)
        logits = model(input_ids=token[:, None], attention_mask=attention, position_ids=next_position[:, None],
                       past_key_values=cache, use_cache=True).logits[:, -1, :]
        next_position = next_position + 1
    width = int(out_mask.sum(-1).max().clamp(min=1))
    return Generated(prefix.prompt_ids, prefix.prompt_mask, out_ids[:, :width], out_mask[:, :width])


def response_texts(tokenizer, generated: Generated) -> list[str]:
    return [tokenizer.decode(ids[mask.bool()].tolist(), skip_special_tokens=True)
            for ids, mask in zip(generated.response_ids, generated.response_mask)]


class EmbeddedGenerator:
    """The embedded backend's scorer side (dataflex_rl.backends.base.Generator): a loaded model that answers rendered
    prompts in batches of similar length (little padding), greedy or sampled from one seeded generator."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    @classmethod
    def load(cls, model_dir, threads: int = 1) -> "EmbeddedGenerator":
        """A model directory: a base, or a trained run's final model."""
        from dataflex_rl.backends.embedded.model import load_model

        torch.set_num_threads(threads)
        return cls(*load_model(model_dir))

    def generate(self, prompts, *, max_new_tokens: int, batch_size: int, temperature: float,
                 seed: int, samples: int = 1) -> list[Answer]:
        """The `samples` copies of the prompts are answered as one list (sample-major), so every copy draws from
        the one seeded generator."""
        from dataflex_rl.backends.embedded.sequences import encode_prompts

        generator = None if temperature == 0 else torch.Generator().manual_seed(seed)
        encoded = encode_prompts(self.tokenizer, list(prompts) * samples)
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        answers: dict[int, Answer] = {}
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            generated = decode(self.model, [encoded[i] for i in chunk], max_new_tokens=max_new_tokens,
                               eos_id=self.tokenizer.eos_token_id, pad_id=self.tokenizer.pad_token_id,
                               generator=generator, temperature=temperature or 1.0)
            lengths = generated.response_mask.sum(-1).tolist()
            for index, text, length in zip(chunk, response_texts(self.tokenizer, generated), lengths):
                answers[index] = Answer(text, int(length))
        return [answers[i] for i in range(len(encoded))]
