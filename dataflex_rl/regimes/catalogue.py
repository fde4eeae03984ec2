"""The regime transforms' parameters and checks, without their implementations: torch- and pandas-free, so that
the dry run (dataflex_rl.study.resolved, dataflex_rl.study.campaign_checks) pays nothing for them.
`registry.apply_regime` runs a transform.

`TransformSpec.check(params, domains_available)` is what a dry run calls: every problem of a regime's parameters
(missing, unknown, wrong type, out of range, a target domain the corpus lacks), each naming the parameter, what was
expected, what was found and the fix. The caller prefixes the config key.
"""
from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any, Mapping, Sequence

from dataflex_rl.config.suggest import did_you_mean

_REQUIRED = object()


@dataclass(frozen=True)
class TransformParam:
    """A transform parameter. `kind`: 'fraction' (a number in [0, 1], or (0, 1] with `open_low`), 'flag' (true or
    false) or 'domain' (a domain of the corpus)."""

    name: str
    kind: str
    default: Any = _REQUIRED
    open_low: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def problem(self, value, domains_available: Sequence[str]) -> str | None:
        if self.kind == "fraction":
            interval = "(0, 1]" if self.open_low else "[0, 1]"
            if isinstance(value, bool) or not isinstance(value, Real):
                return f"{value!r} is not a number; use a number in {interval}"
            if not (0 < value <= 1 if self.open_low else 0 <= value <= 1):
                return f"{value!r} is outside {interval}; use a number in {interval}"
        elif self.kind == "flag" and not isinstance(value, bool):
            return f"{value!r} is not true or false; write true or false"
        elif self.kind == "domain" and value not in domains_available:
            return (f"{value!r} is not a domain of the corpus, whose domains are {sorted(domains_available)}; use one "
                    "of them or add a source of that domain to corpus.sources")
        return None


@dataclass(frozen=True)
class TransformSpec:
    name: str
    params: tuple[TransformParam, ...]
    needs_solve_rates: bool = False

    def check(self, params: Mapping[str, Any], domains_available: Sequence[str]) -> list[str]:
        """Every problem of `params` for this transform, over a corpus with `domains_available`."""
        known = [p.name for p in self.params]
        errors = [f"unknown parameter {name!r} for transform {self.name!r} (known: {', '.join(known)}); remove it"
                  for name in params if name not in known]
        for param in self.params:
            if param.name not in params:
                if param.required:
                    errors.append(f"parameter {param.name!r} of transform {self.name!r} is missing; add it")
            elif problem := param.problem(params[param.name], domains_available):
                errors.append(f"parameter {param.name!r} of transform {self.name!r}: {problem}")
        return errors

    def with_defaults(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {p.name: params.get(p.name, p.default) for p in self.params}


REGIMES: dict[str, TransformSpec] = {transform.name: transform for transform in (
    TransformSpec("label_noise", (TransformParam("fraction", "fraction"),)),
    TransformSpec("subset", (TransformParam("fraction", "fraction", open_low=True),
                               TransformParam("keep_domain_shares", "flag", default=True))),
    TransformSpec("noisy_rewards", (TransformParam("fraction", "fraction"), TransformParam("p", "fraction"))),
    TransformSpec("unbalanced", (TransformParam("target_domain", "domain"), TransformParam("share", "fraction"))),
    TransformSpec("low_utility", (TransformParam("share", "fraction"),), needs_solve_rates=True),
)}


def regime_params(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A config's regime entry without the keys every regime has (`transform`, `seed`): its transform's parameters."""
    return {key: value for key, value in entry.items() if key not in ("transform", "seed")}


def regime_errors(transform: str, params: Mapping[str, Any], domains_available: Sequence[str]) -> list[str]:
    """Every problem of a regime (an unknown transform, or its transform's parameter problems)."""
    if transform not in REGIMES:
        return [f"unknown transform {transform!r}{did_you_mean(transform, REGIMES)} (known: {', '.join(REGIMES)})"]
    return REGIMES[transform].check(params, domains_available)
