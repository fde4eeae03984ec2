"""Dry-run checks of a config's `regimes` and `campaigns` (docs/refusals.md): every name a campaign lists must be
declared, each method must take part in a comparison within its campaign (its control trains there, or it is the
control of a method that does: the mixer campaign's static reference), and a regime name must not collide with the
run paths' own words."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from dataflex_rl.layout import FULL_DATA, UNTRAINED
from dataflex_rl.regimes.catalogue import regime_errors, regime_params
from dataflex_rl.suggest import did_you_mean

_RESERVED_REGIMES = (FULL_DATA, UNTRAINED)


def _unknown(key: str, listed, declared: Mapping, what: str, extra=()) -> list[str]:
    known = [*extra, *declared]
    return [f"{key}: {name!r} is not {what}{did_you_mean(name, known)} (known: {', '.join(map(str, known))}); "
            f"declare it or remove it from the list" for name in listed if name not in known]


def _campaign_errors(name: str, entry: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    key = f"campaigns.{name}"
    regimes = config.get("regimes") or {}
    errors = _unknown(f"{key}.models", entry.get("models", ()), config["models"], "a model of this study")
    errors += _unknown(f"{key}.methods", entry.get("methods", ()), config["methods"], "a method of this study")
    errors += _unknown(f"{key}.regimes", entry.get("regimes", ()), regimes, "a regime of this study", (FULL_DATA,))
    methods = entry.get("methods", list(config["methods"]))
    controls = {method: (config["methods"].get(method) or {}).get("control") for method in methods}
    for method, control in controls.items():
        if control and control not in methods and method not in controls.values():
            errors.append(f"{key}.methods: {method!r} is compared with its control {control!r}, which this campaign "
                          f"does not train, and no method here is compared with {method!r}; add {control!r} to "
                          f"the list")
    return errors


def campaign_errors(config: Mapping[str, Any], domains: Sequence[str]) -> list[str]:
    """Every problem of the config's regimes and campaigns; `domains`: the corpus's domains (an unbalanced regime's
    target must be one of them)."""
    errors = [f"regimes.{name}: {problem}" for name, entry in (config.get("regimes") or {}).items()
              for problem in regime_errors(entry["transform"], regime_params(entry), domains)]
    errors += [f"regimes.{name}: the name {name!r} is reserved ({FULL_DATA!r}: the clean corpus, {UNTRAINED!r}: the "
              f"base model); rename the regime" for name in config.get("regimes") or {} if name in _RESERVED_REGIMES]
    for name, entry in (config.get("campaigns") or {}).items():
        errors += _campaign_errors(name, entry or {}, config)
    return errors
