"""Per-group gradient vectors of GradAlign's probe loss for the embedded backend's HF causal LM (Qwen2).

A rollout (`dataflex_rl.backends.embedded.generation.Generated`: G prompts left-padded, G·K responses right-padded)
is scored here as full sequences, prompt + response, in one forward without a KV cache and with an explicit 4-D
additive attention mask. torch.func cannot carry HF's `DynamicCache`, and HF's own mask builder branches on the mask's
values (`padding_mask.all()`), which vmap refuses; a prepared 4-D mask is used as given. The loop and the vmap path
share this forward, so they differ only in how the per-group backward passes are batched. This module reads the
rollout by its fields and imports no backend, so a backend's trainer can import it without an import cycle.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import functional_call, grad, vmap

from dataflex_rl.prompt_selection.scores import probe_loss, zero_advantage

METHODS = ("loop", "vmap")
# Entries of the projection matrix generated at once: 16 MiB of fp32, whatever P·dim is.
_PROJECTION_BLOCK = 1 << 22


@dataclass(frozen=True)
class ParameterLayout:
    """Where each trainable parameter lies in the flat gradient vector: `named_parameters()` order, tied weights once."""

    slices: dict[str, slice]
    size: int

    @classmethod
    def of(cls, model: torch.nn.Module) -> "ParameterLayout":
        slices, start = {}, 0
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                slices[name] = slice(start, start + parameter.numel())
                start += parameter.numel()
        return cls(slices, start)

    def modules(self) -> dict[str, tuple[str, ...]]:
        """Parameter names grouped by module: a decoder layer splits into its blocks (`model.layers.0.self_attn`,
        `model.layers.0.mlp`, its norms); anything else is the parameter's owning module (`model.embed_tokens`)."""
        groups: dict[str, list[str]] = {}
        for name in self.slices:
            parts = name.split(".")[:-1]
            if "layers" in parts and parts.index("layers") + 2 < len(parts):
                parts = parts[: parts.index("layers") + 3]
            groups.setdefault(".".join(parts), []).append(name)
        return {module: tuple(names) for module, names in groups.items()}


def _trainable(model: torch.nn.Module) -> dict[str, Tensor]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


@contextmanager
def _probe_mode(model: torch.nn.Module, attention: str | None = None):
    """Eval mode (no dropout) and, optionally, another attention kernel; both restored afterwards."""
    was_training, kernel = model.training, model.config._attn_implementation
    model.eval()
    if attention is not None:
        model.config._attn_implementation = attention
    try:
        yield
    finally:
        model.config._attn_implementation = kernel
        model.train(was_training)


def _group_sequences(generated, rewards: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per group: ids [N, K, T] and 0/1 mask [N, K, T] of prompt + response, and the response mask [N, K, L]."""
    groups, rollouts = rewards.shape
    prompts = generated.prompt_ids.shape[0]
    if prompts != groups or generated.response_ids.shape[0] != groups * rollouts:
        raise ValueError(f"rewards [N, K] = {tuple(rewards.shape)} must match the rollout: {prompts} prompts and "
                         f"{generated.response_ids.shape[0]} responses (N·K)")
    width = generated.response_ids.shape[1]
    response_ids = generated.response_ids.view(groups, rollouts, width)
    response_mask = generated.response_mask.view(groups, rollouts, width)
    expand = (groups, rollouts, generated.prompt_ids.shape[1])
    ids = torch.cat([generated.prompt_ids[:, None].expand(expand), response_ids], dim=2)
    mask = torch.cat([generated.prompt_mask[:, None].expand(expand), response_mask], dim=2)
    return ids, mask, response_mask


def _sequence_logprobs(model, params: dict[str, Tensor], ids: Tensor, mask: Tensor, response_width: int) -> Tensor:
    """log π(response token | prefix) [B, L] for full sequences ids/mask [B, T] whose last L tokens are the response."""
    length = ids.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    allowed = causal[None] & mask.bool()[:, None, :]
    # Additive, not boolean: a left-pad query row sees nothing; a finite minimum keeps its softmax (unused) NaN-free.
    additive = torch.zeros(allowed.shape, dtype=torch.float32).masked_fill(~allowed, torch.finfo(torch.float32).min)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = functional_call(model, params, (), {
        "input_ids": ids, "attention_mask": additive[:, None], "position_ids": positions, "use_cache": False,
        "logits_to_keep": response_width + 1}).logits[:, :-1]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, ids[:, -response_width:, None]).squeeze(-1)


def _groups_loss(model, params, ids, mask, response_mask, rewards, aggregation) -> Tensor:
    """Probe loss [n] of n groups: ids/mask [n, K, T], response_mask [n, K, L], rewards [n, K]."""
    groups, rollouts, length = ids.shape
    width = response_mask.shape[-1]
    logp = _sequence_logprobs(model, params, ids.reshape(-1, length), mask.reshape(-1, length), width)
    return probe_loss(logp.view(groups, rollouts, width), rewards, response_mask.float(), aggregation)


def _flat(gradients: dict[str, Tensor], layout: ParameterLayout, leading: tuple[int, ...] = ()) -> Tensor:
    return torch.cat([gradients[name].reshape(*leading, -1).float() for name in layout.slices], dim=-1)


def group_gradients(model, generated, rewards: Tensor, *, aggregation: str = "token_mean", method: str = "vmap",
                    chunk: int = 16) -> Tensor:
    """[N, P] fp32: row g is ∇θ probe_loss of prompt group g's K responses (`ParameterLayout.of(model)` order).

    `loop` runs one forward and backward per group, as the reference does; `vmap` runs torch.func's `vmap(grad)` over
    `chunk` groups at a time with eager attention (SDPA has no vmap batching rule on CPU, so it would be looped over
    the batch inside). Zero-advantage groups are skipped and keep a zero row. The model's parameters, its `.grad`s,
    its training flag and its attention kernel are left as they were.
    """
    if method not in METHODS:
        raise ValueError(f"unknown gradient method {method!r}; known: {', '.join(METHODS)}")
    if chunk < 1:
        raise ValueError(f"chunk must be ≥ 1 group, got {chunk}")
    layout = ParameterLayout.of(model)
    ids, mask, response_mask = _group_sequences(generated, rewards)
    rewards = rewards.float()
    rows = torch.zeros(rewards.shape[0], layout.size, dtype=torch.float32)
    live = (~zero_advantage(rewards)).nonzero().squeeze(-1).tolist()
    parameters = _trainable(model)
    if method == "loop":
        with _probe_mode(model):
            for g in live:
                loss = _groups_loss(model, parameters, ids[g : g + 1], mask[g : g + 1], response_mask[g : g + 1],
                                    rewards[g : g + 1], aggregation).sum()
                rows[g] = _flat(dict(zip(parameters, torch.autograd.grad(loss, list(parameters.values())))), layout)
        return rows

    def one_group(parameters, group_ids, group_mask, group_response_mask, group_rewards):
        return _groups_loss(model, parameters, group_ids[None], group_mask[None], group_response_mask[None],
                            group_rewards[None], aggregation).sum()

    per_group = vmap(grad(one_group), in_dims=(None, 0, 0, 0, 0))
    detached = {name: p.detach() for name, p in parameters.items()}
    with _probe_mode(model, attention="eager"):
        for start in range(0, len(live), chunk):
            index = torch.tensor(live[start : start + chunk])
            gradients = per_group(detached, ids[index], mask[index], response_mask[index], rewards[index])
            rows[index] = _flat(gradients, layout, (len(index),))
    return rows


def summed_gradient(model, generated, rewards: Tensor, *, aggregation: str = "token_mean") -> Tensor:
    """[P] fp32: ∇θ Σ_groups probe_loss in one backward over all groups, the validation gradient g_v before its
    normalisation (the released scorer accumulates one backward over all validation responses)."""
    layout = ParameterLayout.of(model)
    ids, mask, response_mask = _group_sequences(generated, rewards)
    parameters = _trainable(model)
    with _probe_mode(model):
        loss = _groups_loss(model, parameters, ids, mask, response_mask, rewards.float(), aggregation).sum()
        gradients = torch.autograd.grad(loss, list(parameters.values()))
    return _flat(dict(zip(parameters, gradients)), layout)


def random_projection(grads: Tensor, dim: int, seed: int) -> Tensor:
    """Gaussian Johnson–Lindenstrauss projection of [P] or [N, P] vectors to `dim`: entries N(0, 1/dim).

    Off by default: at ~1M parameters it costs more than the exact dot product, and the reference has none. The P×dim
    matrix is drawn row block by row block from one `torch.Generator` seeded by `seed`; the draws are row-major, so
    the matrix depends only on (seed, P, dim), never on the block size, and is never held whole.
    """
    if dim < 1:
        raise ValueError(f"projection dim must be ≥ 1, got {dim}")
    generator = torch.Generator().manual_seed(seed)
    size = grads.shape[-1]
    rows = max(1, _PROJECTION_BLOCK // dim)
    out = torch.zeros(*grads.shape[:-1], dim, dtype=torch.float32)
    for start in range(0, size, rows):
        block = torch.randn(min(rows, size - start), dim, generator=generator) / math.sqrt(dim)
        out += grads[..., start : start + block.shape[0]].float() @ block
    return out
