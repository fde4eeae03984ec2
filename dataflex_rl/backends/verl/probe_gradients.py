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
- `group_gradients`: the [N, P] rows (held on the CPU: for small models and the policies that need the rows),
  each parameter's gradient written into its slice of the row;
- `summed_gradient`: [P], the gradient of the sum of the groups' losses (g_v before normalisation);
- `group_alignment`: per group g·u and ‖g‖, and the chunk's mean scored gradient (prompt_selection.scores.Alignment),
  accumulated one group at a time on the model's device, so an 8B model never holds more than its weights, one
  gradient, u and the mean.
The last two can add their [P] into a `HostSum` instead of returning one of their own: the host then holds one fp32
sum for all the replicas of a round (probe_shards), and each gradient crosses to it one block at a time.
The model's parameters and `.grad`s, each module's training flag and its gradient checkpointing are left as they
were.

The memory of a backward pass (probe_settings.probe_memory estimates it at dry run; line numbers: transformers 5.10.4,
torch 2.13):
- Gradient checkpointing: the decoder layers run checkpointed (Hugging Face's `gradient_checkpointing_enable`), so a
  micro-batch keeps each layer's input hidden states and recomputes one layer's activations at a time in the
  backward. Hugging Face engages it only in train mode (GradientCheckpointingLayer.__call__ tests the layer's own
  `training`: transformers/modeling_layers.py:59-60), so every module is put in eval mode and then only the modules
  that checkpoint have their own `training` flag set (not recursively): every dropout inside them, an nn.Dropout or a
  functional one keyed on its module's flag (the attention's `dropout=0.0 if not self.training`), stays off, and the
  gradients are an eval-mode backward's. Non-reentrant checkpointing (`use_reentrant=False`): the reentrant variant
  gives a region's parameters no gradient unless one of its tensor inputs requires grad (Hugging Face registers an
  input-embedding hook for that), supports only `.backward()` without `inputs`, and always recomputes the whole
  region; the non-reentrant one records the graph as usual and stops recomputing once the tensors it needs are back
  (torch/utils/checkpoint.py:398-421).
- Chunked log-probs: the response positions' last hidden states (the decoder's output, `get_decoder()`, not the
  whole model's logits) go through the LM head (`get_output_embeddings()`) in chunks of `chunk_tokens` tokens of the
  micro-batch (probe_settings.LOGIT_CHUNK_TOKENS), each chunk's logits → fp32 → log_softmax → the targets' entries
  under a non-reentrant checkpoint of its own: one chunk's [B, c, V] is in memory at a time, in the forward and again
  in the backward, never the window's [B, W, V] in fp32. This reads the model as `lm_head(decoder(...))`, as the
  causal LMs the verl backend trains are (Llama, Qwen2, Qwen3: e.g. transformers/models/qwen3/modeling_qwen3.py:
  492-505); a model that transforms its logits after the head (a final soft-capping, a logit scale) or whose
  decoder is not its whole path is refused before the first backward (`_head_and_decoder`).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterable, Iterator, Sequence

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from dataflex_rl.backends.verl.probe_settings import HOST_BLOCK, LOGIT_CHUNK_TOKENS
from dataflex_rl.prompt_selection.gradients import ParameterLayout
from dataflex_rl.prompt_selection.scores import Alignment, mean_weights, probe_coefficients, zero_advantage


@dataclass(frozen=True)
class GroupTokens:
    """One prompt group: the prompt's token ids and its K responses' (each as generated, up to where it stopped)."""

    prompt: tuple[int, ...]
    responses: tuple[tuple[int, ...], ...]


# Attributes that transform a causal LM's logits after its head (Gemma 2/3's final_logit_softcapping, Cohere's
# logit_scale, Granite's logits_scaling): `lm_head(decoder(...))` would not be its logits
_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")
# modules' attributes that Hugging Face's gradient_checkpointing_enable sets, and the model's input-grad hooks
_CHECKPOINT_ATTRIBUTES = ("gradient_checkpointing", "_gradient_checkpointing_func")
_HOOK_ATTRIBUTES = ("_require_grads_hooks", "_require_grads_hook")
_ABSENT = object()


def _head_and_decoder(model, groups: Sequence[GroupTokens]) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The model's LM head and decoder, once it is checked that the head over the decoder's last hidden states gives
    the model's own logits: by its config (no logit transform after the head) and on the first group's first tokens
    (no gradient, eval mode); a ValueError names the model where either fails."""
    name = type(model).__name__
    get_decoder, get_head = getattr(model, "get_decoder", None), getattr(model, "get_output_embeddings", None)
    decoder, head = (get_decoder() if get_decoder else None), (get_head() if get_head else None)
    if decoder is None or head is None or decoder is model:
        raise ValueError(f"{name}: the probe needs a causal LM with a decoder (get_decoder) and an LM head "
                         f"(get_output_embeddings) to compute its log-probs in chunks of positions")
    config = getattr(model, "config", None)
    transforms = [f"{key}={value}" for key in _LOGIT_TRANSFORMS
                  if (value := getattr(config, key, None)) not in (None, 0, 0.0, 1, 1.0)]
    if transforms:
        raise ValueError(f"{name}: its config transforms the logits after the LM head ({', '.join(transforms)}), "
                         f"which the probe's chunked log-probs (the head over the decoder's hidden states) leave out")
    tokens = next((list(g.prompt) + list(r) for g in groups for r in g.responses), [])[:16]
    if tokens:
        ids = torch.tensor([tokens], device=next(model.parameters()).device)
        with torch.no_grad():
            full = model(input_ids=ids, use_cache=False).logits.float()
            composed = head(decoder(input_ids=ids, use_cache=False, return_dict=True).last_hidden_state).float()
        if full.shape != composed.shape or not torch.allclose(full, composed, rtol=1e-3, atol=1e-3):
            raise ValueError(f"{name}: its LM head over its decoder's last hidden states does not give its logits "
                             f"(largest difference {(full - composed).abs().max():.3g} on {len(tokens)} tokens), "
                             f"so the probe's chunked log-probs would not be its own")
    return head, decoder


def _checkpointing_state(model) -> tuple[list[tuple[torch.nn.Module, str, Any]], dict[str, Any]]:
    """What gradient_checkpointing_enable changes: each module's own checkpointing attributes (_ABSENT where the
    module has none of its own), and the model's input-grad hook attributes."""
    modules = [(m, key, vars(m).get(key, _ABSENT)) for m in model.modules() for key in _CHECKPOINT_ATTRIBUTES]
    return modules, {key: vars(model).get(key, _ABSENT) for key in _HOOK_ATTRIBUTES}


def _restore_checkpointing(model, state) -> None:
    modules, hooks = state
    for module, key, value in modules:
        if value is not _ABSENT:
            setattr(module, key, value)
        elif key in vars(module):
            delattr(module, key)
    before = hooks["_require_grads_hooks"]
    for hook in vars(model).get("_require_grads_hooks", None) or []:  # the ones enabling registered
        if before is _ABSENT or all(hook is not old for old in before):
            hook.remove()
    for key, value in hooks.items():
        if value is not _ABSENT:
            setattr(model, key, value)
        elif key in vars(model):
            delattr(model, key)


@contextmanager
def _measuring(model: torch.nn.Module, groups: Sequence[GroupTokens]
               ) -> Iterator[tuple[list[tuple[str, torch.nn.Parameter]], Any]]:
    """Empty `.grad`s, every module in eval mode (no dropout), and gradient checkpointing (non-reentrant) with the
    `training` flag set on the checkpointing modules alone (HF checkpoints only those in train mode); yields the
    trainable parameters in layout order and a function of (input ids, attention mask) that gives the last hidden
    states and the LM head (`_head_and_decoder`). Each module's flag, the checkpointing attributes and the `.grad`s
    are restored afterwards."""
    parameters = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    saved = [p.grad for _, p in parameters]
    modes = [(m, m.training) for m in model.modules()]
    state = _checkpointing_state(model)
    model.eval()
    try:
        head, decoder = _head_and_decoder(model, groups)
        if getattr(model, "supports_gradient_checkpointing", False):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            for module in model.modules():
                if getattr(module, "gradient_checkpointing", False):
                    module.training = True  # this module only: its children, and their dropout, stay in eval

        def hidden(ids: Tensor, attention: Tensor) -> Tensor:
            return decoder(input_ids=ids, attention_mask=attention, use_cache=False, return_dict=True).last_hidden_state

        yield parameters, (hidden, head)
    finally:
        for (_, p), grad in zip(parameters, saved):
            p.grad = grad
        _restore_checkpointing(model, state)
        for module, mode in modes:
            module.training = mode


def _clear(parameters) -> None:
    for _, p in parameters:
        p.grad = None


def _group_coefficients(group: GroupTokens, rewards: Tensor, aggregation: str) -> Tensor:
    """[K, L] the probe coefficients of the group's response tokens (L its longest response)."""
    lengths = torch.tensor([len(r) for r in group.responses])
    mask = (torch.arange(max(1, int(lengths.max())))[None] < lengths[:, None]).float()
    return probe_coefficients(rewards.float()[None], mask[None], aggregation)[0]


def _chunk_logp(head: torch.nn.Module, hidden: Tensor, targets: Tensor) -> Tensor:
    """[B, c] the targets' log-probs at `hidden` [B, c, H]: the head's logits in fp32, log_softmax, the targets'."""
    return torch.log_softmax(head(hidden).float(), dim=-1).gather(-1, targets[..., None])[..., 0]


def response_logp(head: torch.nn.Module, hidden: Tensor, targets: Tensor, chunk_tokens: int) -> Tensor:
    """[B, W] the log-probs of `targets` [B, W] at the hidden states [B, W, H], in chunks of max(1, chunk_tokens //
    B) positions, each under a non-reentrant checkpoint: its [B, c, V] logits and fp32 log-softmax are freed after
    its forward and recomputed in the backward, so one chunk's are in memory at a time."""
    positions = max(1, chunk_tokens // max(1, hidden.shape[0]))
    return torch.cat([checkpoint(partial(_chunk_logp, head), hidden[:, s:s + positions], targets[:, s:s + positions],
                                 use_reentrant=False) for s in range(0, hidden.shape[1], positions)], dim=1)


def _backward_group(model, group: GroupTokens, rewards: Tensor, aggregation: str, micro_batch: int, pad_id: int,
                    forward, chunk_tokens: int) -> None:
    """Add ∇ of the group's probe loss to the parameters' `.grad`, `micro_batch` responses per forward (`forward`:
    the last hidden states' function and the LM head that `_measuring` yields)."""
    hidden_states, head = forward
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
        # response token j is predicted at position len(prompt) + j − 1: the last width + 1 positions, less the final
        hidden = hidden_states(ids.to(device), attention.to(device))[:, -(width + 1):-1]
        logp = response_logp(head, hidden, targets.to(device), chunk_tokens)
        weight = coefficients[start:start + len(responses), :width].to(device)
        valid = weight != 0
        logp = torch.where(valid, logp, torch.zeros_like(logp))
        # −Σ c·ρ at ρ = exp(logp − logp.detach()) = 1: the probe loss's micro-batch part (scores.probe_loss)
        (-(weight * torch.exp(logp - logp.detach())).sum()).backward()


class HostSum:
    """A [P] fp32 sum on the host (`total`, zeros to begin with) that gradients on any device are added into, each
    piece one HOST_BLOCK of elements at a time: its fp32 copy on the host (times `scale` where one is given) is the
    only transient, never a whole [P] vector or a concatenation. Each element's float operations are those of
    `total += vector` (`total += vector * scale`), whatever the blocks."""

    def __init__(self, size: int):
        self.total = torch.zeros(size, dtype=torch.float32)

    def add(self, pieces: Iterable[tuple[slice, Tensor]], scale: float | None = None) -> None:
        """Add each (slice of the flat vector, the flat values there) of `pieces`."""
        for where, values in pieces:
            for start in range(0, values.numel(), HOST_BLOCK):
                block = values[start:start + HOST_BLOCK].float().cpu()
                self.total[where.start + start:where.start + start + block.numel()] += (
                    block if scale is None else block * scale)


def _gradient_pieces(parameters, layout: ParameterLayout) -> list[tuple[slice, Tensor]]:
    """Each parameter's flat `.grad` at its slice of the layout (a parameter without one adds nothing: zeros)."""
    return [(layout.slices[name], p.grad.reshape(-1)) for name, p in parameters if p.grad is not None]


def _check(groups: Sequence[GroupTokens], rewards: Tensor, micro_batch: int, chunk_tokens: int) -> None:
    if rewards.dim() != 2 or rewards.shape[0] != len(groups):
        raise ValueError(f"rewards [N, K] = {tuple(rewards.shape)} must have one row per group ({len(groups)})")
    counts = {len(g.responses) for g in groups}
    if counts and counts != {rewards.shape[1]}:
        raise ValueError(f"every group must hold K = {rewards.shape[1]} responses; got {sorted(counts)}")
    if micro_batch < 1:
        raise ValueError(f"micro_batch must be ≥ 1 response, got {micro_batch}")
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be ≥ 1 token, got {chunk_tokens}")


def group_gradients(model, groups: Sequence[GroupTokens], rewards: Tensor, *, aggregation: str = "token_mean",
                    micro_batch: int = 8, pad_id: int = 0, chunk_tokens: int = LOGIT_CHUNK_TOKENS,
                    into: Tensor | None = None, rows: Sequence[int] | None = None) -> Tensor:
    """[N, P] fp32 on the CPU: row g is ∇θ probe_loss of group g (zero-advantage groups: zeros, not
    back-propagated). With `into` (a zeroed fp32 [·, P] on the CPU) group g's row is written to into[rows[g]]
    (default: g) and `into` returned: each parameter's gradient straight into its slice of the row."""
    _check(groups, rewards, micro_batch, chunk_tokens)
    layout = ParameterLayout.of(model)
    if into is None:
        into = torch.zeros(len(groups), layout.size, dtype=torch.float32)
    with _measuring(model, groups) as (parameters, forward):
        for g in (~zero_advantage(rewards.float())).nonzero().squeeze(-1).tolist():
            _clear(parameters)
            _backward_group(model, groups[g], rewards[g], aggregation, micro_batch, pad_id, forward, chunk_tokens)
            row = into[g if rows is None else rows[g]]
            for where, values in _gradient_pieces(parameters, layout):
                row[where] = values
    return into


def summed_gradient(model, groups: Sequence[GroupTokens], rewards: Tensor, *, aggregation: str = "token_mean",
                    micro_batch: int = 8, pad_id: int = 0, chunk_tokens: int = LOGIT_CHUNK_TOKENS,
                    into: HostSum | None = None) -> Tensor:
    """[P] fp32 on the CPU: ∇θ Σ_groups probe_loss, accumulated over the groups' backward passes; added into `into`
    where one is given (HostSum: its `total` is returned), else into a sum of its own."""
    _check(groups, rewards, micro_batch, chunk_tokens)
    layout = ParameterLayout.of(model)
    into = HostSum(layout.size) if into is None else into
    with _measuring(model, groups) as (parameters, forward):
        _clear(parameters)
        for g in (~zero_advantage(rewards.float())).nonzero().squeeze(-1).tolist():
            _backward_group(model, groups[g], rewards[g], aggregation, micro_batch, pad_id, forward, chunk_tokens)
        into.add(_gradient_pieces(parameters, layout))
    return into.total


def group_alignment(model, groups: Sequence[GroupTokens], rewards: Tensor, direction: Tensor, *,
                    normalise_candidates: bool, aggregation: str = "token_mean", micro_batch: int = 8,
                    pad_id: int = 0, eps: float = 1e-5, chunk_tokens: int = LOGIT_CHUNK_TOKENS,
                    into: HostSum | None = None) -> Alignment:
    """The groups' Alignment with the unit `direction` [P], one group's gradient at a time: g·u and ‖g‖ per group
    (0 for a zero-advantage group, never back-propagated), and Σ_g w_g·g (scores.mean_weights), on the model's
    device; returned on the CPU, the mean added into `into` where one is given (HostSum: its `total` is the
    Alignment's mean)."""
    _check(groups, rewards, micro_batch, chunk_tokens)
    layout = ParameterLayout.of(model)
    if direction.shape != (layout.size,):
        raise ValueError(f"direction must be [P] = [{layout.size}] (the model's trainable parameters), got "
                         f"{tuple(direction.shape)}")
    device = next(model.parameters()).device
    direction = direction.float().to(device)
    zero = zero_advantage(rewards.float())
    dots, norms = torch.zeros(len(groups)), torch.zeros(len(groups))
    mean = torch.zeros(layout.size, dtype=torch.float32, device=device)
    with _measuring(model, groups) as (parameters, forward):
        for g in (~zero).nonzero().squeeze(-1).tolist():
            _clear(parameters)
            _backward_group(model, groups[g], rewards[g], aggregation, micro_batch, pad_id, forward, chunk_tokens)
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
    if into is None:
        return Alignment(dots, norms, mean.cpu())
    into.add([(slice(0, layout.size), mean)])
    return Alignment(dots, norms, into.total)
