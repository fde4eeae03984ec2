"""Per-group gradient vectors of GradAlign's probe loss for the embedded backend's HF causal LM (Qwen2).

A rollout (`dataflex_rl.backends.embedded.generation.Generated`: G prompts left-padded, G·K responses right-padded)
is scored here with each prompt group packed into one sequence (`_pack`), run without a KV cache under an explicit
4-D additive attention mask: torch.func cannot carry HF's `DynamicCache`, and HF's own mask builder branches on the
mask's values (`padding_mask.all()`), which vmap refuses, while a prepared 4-D mask is used as given. The loop and the
vmap path share this forward, so they differ only in how the per-group backward passes are batched. This module reads
the rollout by its fields and imports no backend, so a backend's trainer can import it without an import cycle.
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
    """Where each trainable parameter lies in the flat gradient vector, in `named_parameters()` order (tied weights
    once)."""

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


@dataclass(frozen=True)
class _PackedGroups:
    """Each prompt group as ONE sequence, prompt then its K responses side by side: ids, positions [n, T],
    additive attention mask [n, 1, T, T] (T = P + K·L), and the responses' ids and 0/1 mask [n, K, L]."""

    ids: Tensor
    positions: Tensor
    attention: Tensor
    response_ids: Tensor
    response_mask: Tensor

    def __getitem__(self, index) -> "_PackedGroups":
        return _PackedGroups(*(t[index] for t in self.tensors()))

    def tensors(self) -> tuple[Tensor, ...]:
        return self.ids, self.positions, self.attention, self.response_ids, self.response_mask


def _pack(generated, rewards: Tensor) -> _PackedGroups:
    """Lay each group out as prompt + response 1 + … + response K, every response attending to the prompt and to its
    own earlier tokens, at the positions it had when sampled. The prompt is then run once per group, as the backend's
    shared-prefix KV cache does (G·P + G·K·L tokens, not G·K·(P + L)), but with no cache to carry."""
    groups, rollouts = rewards.shape
    if generated.prompt_ids.shape[0] != groups or generated.response_ids.shape[0] != groups * rollouts:
        prompts, responses = generated.prompt_ids.shape[0], generated.response_ids.shape[0]
        raise ValueError(f"rewards [N, K] = {tuple(rewards.shape)} must match the rollout: {prompts} prompts and "
                         f"{responses} responses (N·K)")
    width = generated.response_ids.shape[1]
    prompt_mask = generated.prompt_mask
    ids = torch.cat([generated.prompt_ids, generated.response_ids.reshape(groups, rollouts * width)], dim=1)
    valid = torch.cat([prompt_mask, generated.response_mask.reshape(groups, rollouts * width)], dim=1).bool()
    length = ids.shape[1]
    block = torch.cat([torch.zeros(prompt_mask.shape[1], dtype=torch.long),
                       torch.arange(1, rollouts + 1).repeat_interleave(width)])
    order = torch.arange(length)
    visible = (order[None, :] <= order[:, None]) & ((block[None, :] == 0) | (block[None, :] == block[:, None]))
    allowed = valid[:, None, :] & visible[None]
    # Additive, not boolean: a left-pad query row sees nothing; a finite minimum keeps its (unused) softmax NaN-free.
    attention = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)[:, None]
    positions = torch.cat([(prompt_mask.cumsum(-1) - 1).clamp(min=0),
                           prompt_mask.sum(-1, keepdim=True) + torch.arange(width).repeat(rollouts)], dim=1)
    return _PackedGroups(ids, positions, attention, generated.response_ids.reshape(groups, rollouts, width),
                         generated.response_mask.reshape(groups, rollouts, width))


def _packed_logprobs(model, params: dict[str, Tensor], packed: _PackedGroups) -> Tensor:
    """log π(response token | prefix) [n, K, L]. Logits are kept from the prompt's last position on: response k's
    token 0 is predicted there, its token j ≥ 1 at its own token j − 1."""
    groups, rollouts, width = packed.response_ids.shape
    logits = functional_call(model, params, (), {
        "input_ids": packed.ids, "attention_mask": packed.attention, "position_ids": packed.positions,
        "use_cache": False, "logits_to_keep": rollouts * width + 1}).logits
    predictor = torch.arange(rollouts * width).view(rollouts, width)
    predictor[:, 0] = 0
    logp = torch.log_softmax(logits[:, predictor.flatten()].float(), dim=-1)
    return logp.gather(-1, packed.response_ids.reshape(groups, -1, 1)).view(groups, rollouts, width)


def _packed_loss(model, params, packed: _PackedGroups, rewards: Tensor, aggregation: str) -> Tensor:
    """Σ of the probe losses of the packed groups."""
    logp = _packed_logprobs(model, params, packed)
    return probe_loss(logp, rewards, packed.response_mask.float(), aggregation).sum()


def _flat(gradients: dict[str, Tensor], layout: ParameterLayout, leading: tuple[int, ...] = ()) -> Tensor:
    return torch.cat([gradients[name].reshape(*leading, -1).float() for name in layout.slices], dim=-1)


def group_gradients(model, generated, rewards: Tensor, *, aggregation: str = "token_mean", method: str = "vmap",
                    chunk: int = 8) -> Tensor:
    """[N, P] fp32: row g is ∇θ probe_loss of prompt group g's K responses (`ParameterLayout.of(model)` order).

    `loop` runs one forward and backward per group, as the reference does; `vmap` runs torch.func's `vmap(grad)` over
    `chunk` groups at a time with eager attention (SDPA has no vmap batching rule on CPU, so it would be looped over
    the batch inside); they agree to ~1e-7 and, on one CPU thread, run at about the same speed (vmap 1.05–1.25× the
    loop at N = 320: benchmarks/README.md). Zero-advantage groups are skipped and keep a zero row. The model's
    parameters, its `.grad`s, its training flag and its attention kernel are left as they were.
    """
    if method not in METHODS:
        raise ValueError(f"unknown gradient method {method!r}; known: {', '.join(METHODS)}")
    if chunk < 1:
        raise ValueError(f"chunk must be ≥ 1 group, got {chunk}")
    layout = ParameterLayout.of(model)
    packed = _pack(generated, rewards)
    rewards = rewards.float()
    rows = torch.zeros(rewards.shape[0], layout.size, dtype=torch.float32)
    live = (~zero_advantage(rewards)).nonzero().squeeze(-1).tolist()
    parameters = _trainable(model)
    if method == "loop":
        with _probe_mode(model):
            for g in live:
                loss = _packed_loss(model, parameters, packed[g : g + 1], rewards[g : g + 1], aggregation)
                rows[g] = _flat(dict(zip(parameters, torch.autograd.grad(loss, list(parameters.values())))), layout)
        return rows

    def one_group(params, *group):
        return _packed_loss(model, params, _PackedGroups(*(t[None] for t in group[:-1])), group[-1][None],
                            aggregation)

    per_group = vmap(grad(one_group), in_dims=(None, 0, 0, 0, 0, 0, 0))
    detached = {name: p.detach() for name, p in parameters.items()}
    with _probe_mode(model, attention="eager"):
        for start in range(0, len(live), chunk):
            index = torch.tensor(live[start : start + chunk])
            gradients = per_group(detached, *packed[index].tensors(), rewards[index])
            rows[index] = _flat(gradients, layout, (len(index),))
    return rows


def summed_gradient(model, generated, rewards: Tensor, *, aggregation: str = "token_mean") -> Tensor:
    """[P] fp32: ∇θ Σ_groups probe_loss in one backward over all groups, the validation gradient g_v before its
    normalisation (the released scorer accumulates one backward over all validation responses)."""
    layout = ParameterLayout.of(model)
    parameters = _trainable(model)
    with _probe_mode(model):
        loss = _packed_loss(model, parameters, _pack(generated, rewards), rewards.float(), aggregation)
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
