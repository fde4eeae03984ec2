"""The registry of policy implementations, and a policy built from its name and parameters.

Each catalogue entry (catalogue.py) is a policy's one declaration; its implementation registers under the entry's
name with `@policy(name)` and takes the entry's parameters, without defaults: the registry checks the parameters
against the entry, fills in the defaults under the given `semantics` and runs the entry's constraints, then passes
them all. Selection and reweighting policies are functions `fn(batch, **params) -> Tensor`; mixtures are
`DomainMixture` classes `cls(domains, **params)`. An implementation may also take `semantics`.

Besides a policy's own parameters, `build_response_policy` understands its family's options (one place, every
policy; defaults in `catalogue.Family`'s `options`):

- `semantics`: "paper" (default; each method as its original paper defines it) or "dataflex_released" (as the
  authors' released DataFlex-RL code ran it). It sets the defaults of the parameters and options that have a
  released one (e.g. topk's scope) and is passed on to an implementation that takes it (e.g. diffband's band edges).
- selection: `drop_kl` (paper: True — a dropped response loses PG and KL; released: False — it keeps its KL term),
  `advantages` ("recompute": GRPO advantages over the kept responses of each group, as GFPO and PODS do; "keep": the
  batch's own advantages, as the released code did; paper default: the entry's `recompute_advantages`),
  `control` ("none" or "random": the matched-random control) with `control_scope` ("batch" or "per_group") and
  `seed` (see `controls.matched_random_mask`).
- reweighting: `normalize` ("batch_mean", "response_mean" or "none"; see `weights.reweighting_weights`).

The registry is complete once the family modules are imported, which `dataflex_rl.policies` does on first use.
"""
from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any, Callable

from .batch import GroupBatch
from .catalogue import CATALOGUE, MASK, PAPER, WEIGHTS, Family, PolicySpec, Role
from .controls import matched_random_mask, subset_group_advantages
from .weights import LossWeights, check_mask, reweighting_weights, selection_diagnostics, selection_weights


@dataclass(frozen=True)
class _Entry:
    spec: PolicySpec
    target: Callable[..., Any] | type | None
    takes: tuple[str, ...]  # the names of the parameters the target takes after the batch (or a mixture's domains)


_REGISTRY: dict[str, _Entry] = {"baseline": _Entry(CATALOGUE["baseline"], None, ())}


def policy(name: str) -> Callable:
    """Register the implementation of the catalogued policy `name`: a function over a `GroupBatch` for a selection
    (returning a 0/1 mask `[G, K]`) or a reweighting (non-negative weights `[G, K]` or `[G, K, L]`), a
    `DomainMixture` subclass for a mixture. Everything else about the policy comes from its catalogue entry."""

    def decorate(target):
        spec = CATALOGUE.get(name)
        if spec is None:
            raise ValueError(f"data policy {name!r} has no catalogue entry: add PolicySpec({name!r}, ...) to "
                             "CATALOGUE in dataflex_rl/policies/catalogue.py (family, signal, parameters with defaults "
                             "and ranges, controls) — the entry declares the policy, its implementation only registers")
        if name in _REGISTRY:
            raise ValueError(f"data policy {name!r} is already registered")
        _REGISTRY[name] = _Entry(spec, target, _taken_params(spec, target))
        return target

    return decorate


def _taken_params(spec: PolicySpec, target) -> tuple[str, ...]:
    """The parameters `target` takes after the batch (or a mixture's domains), refused unless they are the entry's,
    without defaults of their own; `semantics` may be taken where the policy accepts it."""
    problems = []
    mixture = spec.family.role is Role.MIXTURE  # a mixture keeps its state across steps: a class
    if inspect.isclass(target) != mixture:
        problems.append(f"a {spec.family} policy is implemented by a {'class' if mixture else 'function'}")
    declared = list(inspect.signature(target).parameters.values())[1:]
    optional = {"semantics"} & set(spec.accepted())
    own = sorted(p.name for p in declared if p.name not in optional)
    catalogued = sorted(p.name for p in spec.params if p.name not in optional)
    if own != catalogued:
        problems.append(f"parameters {own} differ from the catalogue's {catalogued}")
    restated = [p.name for p in declared if p.default is not inspect.Parameter.empty]
    if restated:
        problems.append(f"parameter(s) {restated} restate a default; defaults live in the catalogue entry only")
    if problems:
        raise ValueError(f"data policy {spec.name!r} disagrees with its entry in dataflex_rl/policies/catalogue.py: "
                         + "; ".join(problems))
    return tuple(p.name for p in declared)


def unimplemented() -> list[str]:
    """Catalogue entries that no implementation has registered under (none once the family modules are loaded)."""
    return [name for name in CATALOGUE if name not in _REGISTRY]


def list_policies() -> list[tuple[str, str, str | None]]:
    """(name, family, signal) of every registered policy, in registration order."""
    return [(name, entry.spec.family, entry.spec.signal) for name, entry in _REGISTRY.items()]


def _lookup(name: str, role: Role) -> _Entry:
    """The registered policy `name` of a family with `role` in the policy driver."""
    entry = _REGISTRY.get(name)
    if entry is None or entry.spec.family.role is not role:
        families = "/".join(family for family in Family if family.role is role)
        known = sorted(n for n, e in _REGISTRY.items() if e.spec.family.role is role)
        raise ValueError(f"unknown {families} policy {name!r}; known: {', '.join(known)}")
    return entry


def _resolve(spec: PolicySpec, params: dict[str, Any], domains: tuple[str, ...]) -> dict[str, Any]:
    """The policy's parameters and options, checked against its catalogue entry and resolved (`PolicySpec.resolve`),
    so a config typo or an out-of-range value fails loudly."""
    accepted = spec.accepted()
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        takes = f"known: {list(accepted)}" if spec.params else f"it takes no parameters (only {', '.join(accepted)})"
        raise ValueError(f"unknown parameter(s) {unknown} for policy {spec.name!r}; {takes}")
    problems = [f"{key} {value!r} {problem}" for key, value in params.items()
                if (problem := accepted[key].problem(value))]
    if not problems:  # the constraints read valid single values
        problems = [f"{key}: {problem}" for key, problem in spec.constraints(params, domains)]
    if problems:
        raise ValueError(f"policy {spec.name!r}: " + "; ".join(problems))
    return spec.resolve(params)


@dataclass(frozen=True)
class ResponsePolicy:
    """A response-level data policy bound to its parameters; `weigh(batch)` gives the loss weights for one step.

    params go to the policy function; options (semantics, drop_kl, advantages, control, control_scope, seed,
    normalize) go to the family's conversion into loss weights, already resolved against `semantics`.
    """

    name: str
    family: Family
    signal: str | None
    params: dict[str, Any]
    options: dict[str, Any]

    def weigh(self, batch: GroupBatch) -> LossWeights:
        mask = batch.token_mask
        if self.family.output is None:
            return LossWeights(pg=mask.clone(), kl=mask.clone(), kept_fraction=1.0, info={})
        output = _REGISTRY[self.name].target(batch, **self.params)
        if self.family.output == WEIGHTS:
            normalize = self.options["normalize"]
            if normalize is None:  # released: per-response weights mean 1 over responses, token weights over tokens
                normalize = "response_mean" if output.shape == mask.shape[:2] else "batch_mean"
            return reweighting_weights(output, mask, normalize=normalize)
        check_mask(output, tuple(batch.rewards.shape))  # a MASK: the responses a selection keeps
        if self.options["control"] == "random":
            output = matched_random_mask(output, self.options["seed"], batch.prompt_ids, self.options["control_scope"])
        recompute = self.options["advantages"] == "recompute"
        advantages = subset_group_advantages(batch.rewards, output) if recompute else None
        weights = selection_weights(output, mask, drop_kl=self.options["drop_kl"], advantages=advantages)
        used = weights.advantages if recompute else batch.advantages
        info = {**weights.info, **selection_diagnostics(output, used, mask)}
        return dataclasses.replace(weights, info=info)


def build_response_policy(name: str, params: dict[str, Any] | None = None) -> ResponsePolicy:
    """The named baseline, selection or reweighting policy with checked parameters and resolved options."""
    params = dict(params or {})
    entry = _lookup(name, Role.RESPONSE_POLICY)
    spec = entry.spec
    resolved = _resolve(spec, params, domains=())
    options = {option.name: resolved[option.name] for option in spec.options}
    if spec.family.output == MASK and options["advantages"] is None:  # over the kept responses, or the batch's own
        recompute = spec.recompute_advantages and options["semantics"] == PAPER
        options["advantages"] = "recompute" if recompute else "keep"
    if spec.family.matched_random_control and "control_scope" in params and options["control"] != "random":
        raise ValueError(f"control_scope is only meaningful with control: random (policy {name!r})")
    return ResponsePolicy(name=name, family=spec.family, signal=spec.signal,
                          params={key: resolved[key] for key in entry.takes}, options=options)


@dataclass(frozen=True)
class PromptSelectionPolicy:
    """A prompt-selection policy bound to its parameters; `rank(round)` gives a round's kept rows. `options` are the
    family's: the round sizes, the validation draw and the response policy applied to the kept prompts."""

    name: str
    signal: str | None
    params: dict[str, Any]
    options: dict[str, Any]

    def rank(self, round_):
        return _REGISTRY[self.name].target(round_, **self.params)

    def response_policy(self) -> ResponsePolicy:
        return build_response_policy(self.options["response_policy"], self.options["response_params"])


def build_prompt_selection(name: str, params: dict[str, Any] | None = None) -> PromptSelectionPolicy:
    """The named prompt-selection policy with checked parameters and resolved options."""
    entry = _lookup(name, Role.PROMPT_SELECTION)
    resolved = _resolve(entry.spec, dict(params or {}), domains=())
    return PromptSelectionPolicy(name=name, signal=entry.spec.signal,
                                 params={key: resolved[key] for key in entry.takes},
                                 options={option.name: resolved[option.name] for option in entry.spec.options})


def build_mixture(name: str, domains: list[str], params: dict[str, Any] | None = None):
    """The named domain mixture over `domains`, constructed with checked and resolved parameters."""
    entry = _lookup(name, Role.MIXTURE)
    resolved = _resolve(entry.spec, dict(params or {}), domains=tuple(domains))
    return entry.target(list(domains), **{key: resolved[key] for key in entry.takes})
