"""Per-group gradients of GradAlign's probe loss on any Hugging Face causal LM, at the scale of the verl backend's
models: the gradient of the current weights, no optimiser step.

A group is one prompt and its K sampled responses (`GroupTokens`, token ids as the rollout engine returned them). Its
responses are run as ordinary right-padded sequences (prompt + response) in micro-batches of `micro_batch`, each
token's −ρ weighted by its probe coefficient (prompt_selection.scores.probe_coefficients) and back-propagated into the
parameters' `.grad`, so the micro-batches add up to the group's probe loss whatever their size: the released scorer
back-propagates mini-batches of 8 responses the same way. No 4-D mask and no torch.func are needed (the embedded
path packs a group into one sequence, which at 8k-token responses would need a [T, T] mask of ~10^10 entries).

Three reductions of the groups' gradients, each in the parameter layout's order (prompt_selection.gradients.
ParameterLayout) and fp32:
- `group_gradients`: the [N, P] rows (held on the CPU: for small models and the policies that need the rows);
- `summed_gradient`: [P], the gradient of the sum of the groups' losses (g_v before normalisation);
- `group_alignment`: per group g·u and ‖g‖, and the chunk's mean scored gradient (prompt_selection.scores.Alignment),
  accumulated one group at a time on the model's device, so an 8B model never holds more than its weights, one
  gradient, u and the mean.
The model's parameters, `.grad`s and training flag are left as they were.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import torch
from torch import Tensor

from dataflex_rl.prompt_selection.gradients import ParameterLayout
from dataflex_rl.prompt_selection.scores import Alignment, mean_weights, probe_coefficients, zero_advantage


@dataclass(frozen=True)
class GroupTokens:
    """One prompt group: the prompt's token ids and its K responses' (each as generated, up to where it stopped)."""

    prompt: tuple[int, ...]
    responses: tuple[tuple[int, ...], ...]


@contextmanager
def _measuring(model: torch.nn.Module) -> Iterator[list[tuple[str, torch.nn.Parameter]]]:
    """Eval mode (no dropout) and empty `.grad`s for the backward passes; the model's own flag and `.grad`s are
    restored afterwards. Yields the trainable parameters in layout order."""
    parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in parameters]
    was_training = model.training
    model.eval()
    try:
        yield parameters
    finally:
        for (_, p), grad in zip(parameters, saved):
            p.grad = grad
        model.train(was_training)


def _clear(parameters) -> None:
    for _, p in parameters:
        p.grad = None


def _group_coefficients(group: GroupTokens, rewards: Tensor, aggregation: str) -> Tensor:
    """[K, L] the probe coefficients of the group's response tokens (L its longest response)."""
    lengths = torch.tensor([len(r) for r in group.responses])
    mask = (torch.arange(max(1, int(lengths.max())))[None] < lengths[:, None]).float()
    return probe_coefficients(rewards.float()[None], mask[None], aggregation)[0]


def _backward_group(model, group: GroupTokens, rewards: Tensor, aggregation: str, micro_batch: int,
                    pad_id: int) -> None:
    """Add ∇ of the group's probe loss to the parameters' `.grad`, `micro_batch` responses per forward."""
    device = next(model.parameters()).device
    coefficients = _group_coefficients(group, rewards, aggregation)
    prompt = list(group.prompt)
    for start in range(0, len(group.responses), micro_batch):
        responses = group.responses[start:start + micro_batch]
        width = max(len(r) for r in responses)
        if width == 0:
            continue
        ids = torch.full((len(responses), len(prompt) + width), pad_id, dtype=torch.long)
        attention = torch.zeros_like(ids)
        targets = torch.full((len(responses), width), pad_id, dtype=torch.long)
        for i, response in enumerate(responses):
            ids[i, :len(prompt) + len(response)] = torch.tensor(prompt + list(response), dtype=torch.long)
            attention[i, :len(prompt) + len(response)] = 1
            targets[i, :len(response)] = torch.tensor(response, dtype=torch.long)
        # response token j is predicted at position len(prompt) + j − 1: the last width + 1 positions' logits, less
        # the final one
        logits = model(input_ids=ids.to(device), attention_mask=attention.to(device), use_cache=False,
                       logits_to_keep=width + 1).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.to(device)[..., None])[..., 0]
        weight = coefficients[start:start + len(responses), :width].to(device)
        valid = weight != 0
        logp = torch.where(valid, logp, torch.zeros_like(logp))
        # −Σ c·ρ at ρ = exp(logp − logp.detach()) = 1: the probe loss's micro-batch part (scores.probe_loss)
        (-(weight * torch.exp(logp - logp.detach())).sum()).backward()


def _flat(parameters, device: torch.device | str = "cpu") -> Tensor:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float().to(device)
                      for _, p in parameters])


def _check(groups: Sequence[GroupTokens], rewards: Tensor, micro_batch: int) -> None:
    if rewards.dim() != 2 or rewards.shape[0] != len(groups):
        raise ValueError(f"rewards [N, K] = {tuple(rewards.shape)} must have one row per group ({len(groups)})")
    counts = {len(g.responses) for g in groups}
    if counts and counts != {rewards.shape[1]}:
        raise ValueError(f"every group must hold K = {rewards.shape[1]} responses; got {sorted(counts)}")
    if micro_batch < 1:
        raise ValueError(f"micro_batch must be ≥ 1 response, got {micro_batch}")


def group_gradients(model, groups: Sequence[GroupTokens], rewards: Tensor, *, aggregation: str = "token_mean",
                    micro_batch: int = 8, pad_id: int = 0) -> Tensor:
    """[N, P] fp32 on the CPU: row g is ∇θ probe_loss of group g (zero-advantage groups: zeros, not
    back-propagated)."""
    _check(groups, rewards, micro_batch)
    layout = ParameterLayout.of(model)
    rows = torch.zeros(len(groups), layout.size, dtype=torch.float32)
    with _measuring(model) as parameters:
        for g in (~zero_advantage(rewards.float())).nonzero().squeeze(-1).tolist():
            _clear(parameters)
            _backward_group(model, groups[g], rewards[g], aggregation, micro_batch, pad_id)
            rows[g] = _flat(parameters)
    return rows


def summed_gradient(model, groups: Sequence[GroupTokens], rewards: Tensor, *, aggregation: str = "token_mean",
                    micro_batch: int = 8, pad_id: int = 0) -> Tensor:
    """[P] fp32 on the CPU: ∇θ Σ_groups probe_loss, accumulated over the groups' backward passes."""
    _check(groups, rewards, micro_batch)
    with _measuring(model) as parameters:
        _clear(parameters)
        for g in (~zero_advantage(rewards.float())).nonzero().squeeze(-1).tolist():
            _backward_group(model, groups[g], rewards[g], aggregation, micro_batch, pad_id)
        return _flat(parameters)


def group_alignment(model, groups: Sequence[GroupTokens], rewards: Tensor, direction: Tensor, *,
                    normalise_candidates: bool, aggregation: str = "token_mean", micro_batch: int = 8,
                    pad_id: int = 0, eps: float = 1e-5) -> Alignment:
    """The groups' Alignment with the unit `direction` [P], one group's gradient at a time: g·u and ‖g‖ per group
    (0 for a zero-advantage group, never back-propagated), and Σ_g w_g·g (scores.mean_weights), on the model's
    device; returned on the CPU."""
    _check(groups, rewards, micro_batch)
    layout = ParameterLayout.of(model)
    if direction.shape != (layout.size,):
        raise ValueError(f"direction must be [P] = [{layout.size}] (the model's trainable parameters), got "
                         f"{tuple(direction.shape)}")
    device = next(model.parameters()).device
    direction = direction.float().to(device)
    zero = zero_advantage(rewards.float())
    dots, norms = torch.zeros(len(groups)), torch.zeros(len(groups))
    mean = torch.zeros(layout.size, dtype=torch.float32, device=device)
    with _measuring(model) as parameters:
        for g in (~zero).nonzero().squeeze(-1).tolist():
            _clear(parameters)
            _backward_group(model, groups[g], rewards[g], aggregation, micro_batch, pad_id)
            dot = torch.zeros((), dtype=torch.float64, device=device)
            square = torch.zeros((), dtype=torch.float64, device=device)
            for name, p in parameters:
                if p.grad is not None:
                    grad = p.grad.reshape(-1).float()
                    dot += (grad @ direction[layout.slices[name]]).double()
                    square += grad.double().square().sum()
            dots[g], norms[g] = float(dot), float(square.sqrt())
            weight = float(mean_weights(norms[g : g + 1], zero[g : g + 1], normalise_candidates=normalise_candidates,
                                        eps=eps)[0]) / len(groups)
            for name, p in parameters:
                if p.grad is not None:
                    mean[layout.slices[name]] += weight * p.grad.reshape(-1).float()
    return Alignment(dots, norms, mean.cpu())
