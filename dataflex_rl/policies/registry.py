"""One registry for every data-policy family, and the conversion of a policy's output into loss weights.

Selection and reweighting policies are pure functions `fn(batch, **params) -> Tensor`; mixtures are classes. The
family wrappers here turn a mask or a weight tensor into the `pg` and `kl` weights that `grpo.grpo_loss` expects, so
every policy meets the loss through the same, tested conversion — including its degenerate cases.

Besides a policy's own parameters, `build_response_policy` understands these options (one place, every policy):

- `semantics`: "paper" (default; each method as its original paper defines it) or "dataflex_released" (as the
  authors' released DataFlex-RL code ran it). It sets the defaults of the options below and is passed on to a policy
  function that declares a `semantics` parameter (e.g. topk's scope, diffband's band edges).
- selection: `drop_kl` (paper: True — a dropped response loses PG and KL; released: False — it keeps its KL term),
  `advantages` ("recompute": GRPO advantages over the kept responses of each group, as GFPO and PODS do; "keep": the
  batch's own advantages, as the released code did; paper default declared per policy at registration),
  `control` ("none" or "random": the matched-random control) with `control_scope` ("batch" or "per_group") and
  `seed` (see `matched_random_mask`).
- reweighting: `normalize` ("batch_mean", "response_mean" or "none"; see `reweighting_weights`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from .batch import GroupBatch
from .catalogue import (  # noqa: F401  (re-exported: the catalogue is the one source of these names)
    ADVANTAGE_MODES,
    CONTROL_SCOPES,
    CONTROLS,
    NORMALIZE_MODES,
    OPTIONS,
    PAPER,
    RELEASED,
    SEMANTICS,
    catalogue_errors,
)

# The GRPO recipe's own constant (grpo.group_advantages): recomputed advantages use the same normalisation.
ADVANTAGE_EPS = 1e-6


def check_semantics(semantics: str) -> str:
    if semantics not in SEMANTICS:
        raise ValueError(f"unknown semantics {semantics!r}; known: {', '.join(SEMANTICS)}")
    return semantics


@dataclass(frozen=True)
class LossWeights:
    """Per-token weights for the PG and KL terms `[G, K, L]` (zero on padding), plus what the trainer should log.

    kept_fraction: share of responses whose PG term the policy kept (mask mean for a selection, share of responses
    with positive weight for a reweighting).
    advantages: None, or token advantages `[G, K, L]` (zero on padding and on dropped responses) that the trainer
    must use instead of `batch.advantages` — set by a selection that recomputes GRPO advantages over the kept
    responses of each group (GFPO, PODS).
    """

    pg: Tensor
    kl: Tensor
    kept_fraction: float
    info: dict[str, Any] = field(default_factory=dict)
    advantages: Tensor | None = None


@dataclass(frozen=True)
class _Entry:
    name: str
    family: str
    signal: str | None
    target: Callable[..., Any] | type | None
    recompute_advantages: bool = False


_REGISTRY: dict[str, _Entry] = {"baseline": _Entry("baseline", "none", None, None)}


def _register(family: str, name: str, signal: str | None, recompute_advantages: bool = False) -> Callable:
    def decorate(target):
        if name in _REGISTRY:
            raise ValueError(f"data policy {name!r} is already registered (as {_REGISTRY[name].family})")
        problems = catalogue_errors(name, family, signal, target, recompute_advantages)
        if problems:
            raise ValueError(f"data policy {name!r} disagrees with dataflex_rl/policies/catalogue.py: "
                             + "; ".join(problems))
        _REGISTRY[name] = _Entry(name, family, signal, target, recompute_advantages)
        return target

    return decorate


def selection(name: str, signal: str, recompute_advantages: bool = False) -> Callable:
    """Register `fn(batch, **params) -> mask [G, K]` with values in {0, 1}.

    recompute_advantages: the method's paper recomputes GRPO advantages over the kept responses of each group (the
    default of the `advantages` option under `semantics: paper`).
    """
    return _register("selection", name, signal, recompute_advantages)


def reweighting(name: str, signal: str) -> Callable:
    """Register `fn(batch, **params) -> weights [G, K, L] or [G, K]`, all ≥ 0."""
    return _register("reweighting", name, signal)


def mixture(name: str, signal: str | None = None) -> Callable:
    """Register a `DomainMixture` subclass constructed as `cls(domains, **params)`."""
    return _register("mixture", name, signal)


def _load_families() -> None:
    """Import the family modules, whose import registers their policies (a no-op once they are loaded), so the
    registry is complete however it was reached — `dataflex_rl.policies` loads them only on first use."""
    from . import mixture, reweighting, selection  # noqa: F401


def list_policies() -> list[tuple[str, str, str | None]]:
    """(name, family, signal) of every registered policy, in registration order."""
    _load_families()
    return [(entry.name, entry.family, entry.signal) for entry in _REGISTRY.values()]


def _lookup(name: str, families: tuple[str, ...]) -> _Entry:
    _load_families()
    entry = _REGISTRY.get(name)
    if entry is None or entry.family not in families:
        known = sorted(e.name for e in _REGISTRY.values() if e.family in families)
        raise ValueError(f"unknown {'/'.join(families)} policy {name!r}; known: {', '.join(known)}")
    return entry


def _check_params(
    name: str, signature: inspect.Signature, params: dict, skip: int, extra: tuple[str, ...] = ()
) -> None:
    """Refuse unknown or missing parameters by the policy's own signature, so a config typo fails loudly."""
    declared = list(signature.parameters.values())[skip:]
    known = [p.name for p in declared] + list(extra)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for policy {name!r}; known: {known}")
    missing = [p.name for p in declared if p.default is inspect.Parameter.empty and p.name not in params]
    if missing:
        raise ValueError(f"policy {name!r} needs parameter(s) {missing}")


# --- selection ----------------------------------------------------------------------------------------------------

def _check_mask(mask: Tensor, groups_rollouts: tuple[int, ...]) -> None:
    if tuple(mask.shape) != tuple(groups_rollouts):
        raise ValueError(f"a selection mask must be [G, K] = {tuple(groups_rollouts)}, got {tuple(mask.shape)}")
    if not ((mask == 0) | (mask == 1)).all():
        raise ValueError("a selection mask must contain only 0 and 1")


def subset_group_advantages(rewards: Tensor, mask: Tensor, eps: float = ADVANTAGE_EPS) -> Tensor:
    """GRPO advantages recomputed over the kept responses of each group: (r − mean_kept) / (std_kept + eps), `[G, K]`.

    As GFPO ("trained on the filtered group") and PODS (the down-sampled subset is the group) define it. The std is
    the unbiased one over the kept responses, as in `grpo.group_advantages`, so keeping every response reproduces the
    recipe's advantages. Dropped responses get 0. A group with one kept response has nothing to be compared with and
    gets 0 (not verl's K = 1 convention of A = r, which would turn a lone survivor's raw reward into a signal); a
    group with none kept gets 0. Never NaN.
    """
    _check_mask(mask, tuple(rewards.shape))
    keep = mask.to(rewards.dtype)
    count = keep.sum(dim=1, keepdim=True)
    mean = (rewards * keep).sum(dim=1, keepdim=True) / count.clamp_min(1.0)
    centred = (rewards - mean) * keep
    std = (centred.square().sum(dim=1, keepdim=True) / (count - 1.0).clamp_min(1.0)).sqrt()
    advantages = centred / (std + eps)
    return torch.where(count >= 2, advantages, torch.zeros_like(advantages)) * keep


def _control_generator(seed: int, prompt_ids: tuple[str, ...]) -> torch.Generator:
    """A generator seeded from (seed, the batch's prompt ids): deterministic per step, no global RNG."""
    digest = hashlib.sha256(json.dumps([int(seed), list(prompt_ids)]).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little"))


def matched_random_mask(mask: Tensor, seed: int, prompt_ids: tuple[str, ...], scope: str = "batch") -> Tensor:
    """The matched-random control of a selection: keep as many responses as `mask` does, chosen uniformly at random.

    scope="batch": the same total over the batch, any responses (the only scope that is a real control for
    difffilter, which keeps whole groups); scope="per_group": the same count within every group.
    The randomness is derived from `seed` and the batch's prompt ids only, so a control is reproducible, independent
    of the rewards, and the same across methods on the same batch (common random numbers: two controls that keep
    n ≤ n' responses keep nested sets). A batch of the same prompts in the same order draws the same mask.
    """
    if scope not in CONTROL_SCOPES:
        raise ValueError(f"unknown control_scope {scope!r}; known: {', '.join(CONTROL_SCOPES)}")
    _check_mask(mask, tuple(mask.shape))
    groups, rollouts = mask.shape
    noise = torch.rand(groups, rollouts, generator=_control_generator(seed, prompt_ids), dtype=torch.float64)
    if scope == "batch":
        order = noise.flatten().argsort()
        kept = torch.zeros(groups * rollouts, dtype=mask.dtype)
        kept[order[: int(mask.sum())]] = 1
        return kept.view(groups, rollouts)
    rank = noise.argsort(dim=1).argsort(dim=1)  # rank of each response's draw within its group
    return (rank < mask.sum(dim=1, keepdim=True)).to(mask.dtype)


def selection_weights(
    mask: Tensor, token_mask: Tensor, drop_kl: bool = True, advantages: Tensor | None = None
) -> LossWeights:
    """A 0/1 response mask → loss weights: pg = kl = m·token_mask (Eq. 1; a drop removes both terms).

    `drop_kl=False` reproduces the released DataFlex-RL code, where a dropped response keeps its KL term.
    `advantages` (`[G, K]` or `[G, K, L]`), when given, are passed on zeroed on padding and on dropped responses.
    Nothing is renormalised: a dropped response stays in the 1/(G·K) denominator, so the step shrinks.
    """
    _check_mask(mask, tuple(token_mask.shape[:2]))
    pg = mask.to(token_mask.dtype)[..., None] * token_mask
    kl = pg.clone() if drop_kl else token_mask.clone()
    if advantages is not None:
        if tuple(advantages.shape) == tuple(mask.shape):
            advantages = advantages[..., None]
        if advantages.dim() != 3 or advantages.shape[:2] != mask.shape or advantages.shape[2] not in (
                1, token_mask.shape[2]):
            raise ValueError(f"advantages must be [G, K] or [G, K, L] for token_mask {tuple(token_mask.shape)}, "
                             f"got {tuple(advantages.shape)}")
        if not torch.isfinite(advantages).all():
            raise ValueError("recomputed advantages must be finite")
        advantages = advantages.to(token_mask.dtype) * pg
    kept = float(mask.to(token_mask.dtype).mean())
    return LossWeights(pg=pg, kl=kl, kept_fraction=kept, info={"all_dropped": kept == 0.0}, advantages=advantages)


def _selection_diagnostics(mask: Tensor, used_advantages: Tensor, token_mask: Tensor) -> dict[str, Any]:
    """Counts the trainer logs, so that a step with no policy-gradient signal is never silent."""
    kept = mask > 0
    per_group = kept.sum(dim=1)
    signal = ((used_advantages * token_mask).abs().sum(dim=-1) > 0) & kept
    return {
        "kept_responses": int(kept.sum()),
        "kept_groups": int((per_group > 0).sum()),
        "single_kept_groups": int((per_group == 1).sum()),
        # kept responses whose advantage is zero on every token: they carry KL but no PG signal
        "zero_advantage_kept": int((kept & ~signal).sum()),
    }


# --- reweighting --------------------------------------------------------------------------------------------------

def reweighting_weights(weights: Tensor, token_mask: Tensor, normalize: str = "batch_mean") -> LossWeights:
    """Non-negative weights ([G, K, L] or [G, K]) → loss weights: pg = w·token_mask, kl = token_mask (Eq. 2).

    normalize (over what the weights are rescaled; the KL term is never weighted):
    - "batch_mean": pg's mean over the batch's valid tokens is 1 (the released code's rule for token weights, AR).
    - "response_mean": the mean over responses of each response's token-mean weight is 1 — for `[G, K]` weights
      w / mean(w) over all G·K responses, the released code's rule for per-response weights. Under Eq. 1 this keeps
      the loss on the baseline's scale exactly. For `[G, K, L]` weights the mean runs over non-empty responses.
    - "none": the raw weights.
    Weights that are zero on every valid token carry no direction, so they fall back to uniform 1
    (info["degenerate_weights"]).
    """
    if normalize not in NORMALIZE_MODES:
        raise ValueError(f"unknown normalize mode {normalize!r}; known: {', '.join(NORMALIZE_MODES)}")
    per_response = weights.shape == token_mask.shape[:2]
    if per_response:
        weights = weights[..., None]
    groups_rollouts, max_len = token_mask.shape[:2], token_mask.shape[2]
    if weights.dim() != 3 or weights.shape[:2] != groups_rollouts or weights.shape[2] not in (1, max_len):
        raise ValueError(f"reweighting weights must be [G, K, L] or [G, K] for token_mask {tuple(token_mask.shape)}, "
                         f"got {tuple(weights.shape)}")
    if not torch.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("reweighting weights must be finite and non-negative")
    weights = weights.to(token_mask.dtype)
    pg = weights.expand_as(token_mask) * token_mask
    degenerate = bool(pg.sum() == 0)
    if degenerate:
        weights, pg = torch.ones_like(token_mask[..., :1]), token_mask.clone()
        per_response = True
    if pg.sum() == 0:  # every response is empty: nothing to weigh, and no 0/0
        pass
    elif normalize == "batch_mean":
        pg = pg * (token_mask.sum() / pg.sum())
    elif normalize == "response_mean":
        if per_response and weights.shape[2] == 1:
            pg = pg / weights.mean()
        else:
            lengths = token_mask.sum(dim=-1)
            nonempty = lengths > 0
            token_means = pg.sum(dim=-1) / lengths.clamp_min(1.0)
            pg = pg * (nonempty.sum() / token_means[nonempty].sum())
    kept = 1.0 if degenerate else float((weights.expand_as(token_mask).amax(dim=-1) > 0).to(token_mask.dtype).mean())
    return LossWeights(pg=pg, kl=token_mask.clone(), kept_fraction=kept, info={"degenerate_weights": degenerate})


# --- binding a policy to its parameters -----------------------------------------------------------------------------

@dataclass(frozen=True)
class ResponsePolicy:
    """A response-level data policy bound to its parameters; `weigh(batch)` gives the loss weights for one step.

    params go to the policy function; options (semantics, drop_kl, advantages, control, control_scope, seed,
    normalize) go to the family's conversion into loss weights, already resolved against `semantics`.
    """

    name: str
    family: str
    signal: str | None
    params: dict[str, Any]
    options: dict[str, Any]

    def weigh(self, batch: GroupBatch) -> LossWeights:
        mask = batch.token_mask
        if self.family == "none":
            return LossWeights(pg=mask.clone(), kl=mask.clone(), kept_fraction=1.0, info={})
        output = _REGISTRY[self.name].target(batch, **self.params)
        if self.family == "reweighting":
            normalize = self.options["normalize"]
            if normalize is None:  # released: per-response weights mean 1 over responses, token weights over tokens
                normalize = "response_mean" if output.shape == mask.shape[:2] else "batch_mean"
            return reweighting_weights(output, mask, normalize=normalize)
        _check_mask(output, tuple(batch.rewards.shape))
        if self.options["control"] == "random":
            output = matched_random_mask(output, self.options["seed"], batch.prompt_ids, self.options["control_scope"])
        recompute = self.options["advantages"] == "recompute"
        advantages = subset_group_advantages(batch.rewards, output) if recompute else None
        weights = selection_weights(output, mask, drop_kl=self.options["drop_kl"], advantages=advantages)
        used = weights.advantages if recompute else batch.advantages
        info = {**weights.info, **_selection_diagnostics(output, used, mask)}
        return dataclasses.replace(weights, info=info)


# Options the registry consumes rather than the policy function (`semantics` is also passed to a function that
# declares it).
_OPTIONS = {family: tuple(option.name for option in options) for family, options in OPTIONS.items() if options}


def _resolve_options(entry: _Entry, options: dict[str, Any]) -> dict[str, Any]:
    semantics = check_semantics(options.get("semantics", PAPER))
    resolved: dict[str, Any] = {"semantics": semantics}
    if entry.family == "selection":
        paper = semantics == PAPER
        resolved["drop_kl"] = bool(options.get("drop_kl", paper))
        resolved["advantages"] = options.get(
            "advantages", "recompute" if paper and entry.recompute_advantages else "keep")
        resolved["control"] = options.get("control", "none")
        resolved["control_scope"] = options.get("control_scope", "batch")
        resolved["seed"] = int(options.get("seed", 0))
        for key, known in (("advantages", ADVANTAGE_MODES), ("control", CONTROLS), ("control_scope", CONTROL_SCOPES)):
            if resolved[key] not in known:
                raise ValueError(f"unknown {key} {resolved[key]!r} for policy {entry.name!r}; "
                                 f"known: {', '.join(known)}")
        if "control_scope" in options and resolved["control"] != "random":
            raise ValueError(f"control_scope is only meaningful with control: random (policy {entry.name!r})")
    elif entry.family == "reweighting":
        normalize = options.get("normalize", "batch_mean" if semantics == PAPER else None)
        if normalize is not None and normalize not in NORMALIZE_MODES:
            raise ValueError(f"unknown normalize mode {normalize!r}; known: {', '.join(NORMALIZE_MODES)}")
        resolved["normalize"] = normalize
    return resolved


def build_response_policy(name: str, params: dict[str, Any] | None = None) -> ResponsePolicy:
    """The named baseline, selection or reweighting policy with validated parameters and resolved options."""
    params = dict(params or {})
    entry = _lookup(name, ("none", "selection", "reweighting"))
    options = {key: params.pop(key) for key in _OPTIONS[entry.family] if key in params}
    if entry.family == "none":
        if params:
            raise ValueError(f"policy 'baseline' takes no parameters (only semantics), got {sorted(params)}")
    else:
        signature = inspect.signature(entry.target)
        _check_params(name, signature, params, skip=1, extra=_OPTIONS[entry.family])
    options = _resolve_options(entry, options)
    if entry.family != "none" and "semantics" in inspect.signature(entry.target).parameters:
        params["semantics"] = options["semantics"]
    return ResponsePolicy(name=name, family=entry.family, signal=entry.signal, params=params, options=options)


def build_mixture(name: str, domains: list[str], params: dict[str, Any] | None = None):
    """The named domain mixture over `domains`, constructed with validated parameters."""
    params = dict(params or {})
    entry = _lookup(name, ("mixture",))
    _check_params(name, inspect.signature(entry.target), params, skip=1)  # skip domains
    return entry.target(list(domains), **params)
