"""Dry-run checks of a study's `regimes` and `campaigns` (docs/refusals.md): every name a campaign lists must be
declared, each method must take part in a comparison within its campaign (its control trains there, or it is the
control of a method that does: the mixer campaign's static reference), a regime name must not collide with the
run paths' own words, and an unbalanced pool must keep the validation prompts its prompt selections draw."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from dataflex_rl.study.corpus_bound import domain_rows_bound
from dataflex_rl.artefacts.layout import FULL_DATA, UNTRAINED
from dataflex_rl.regimes.catalogue import REGIMES, regime_errors
from dataflex_rl.regimes.shares import pool_sizes_at_share
from dataflex_rl.study.resolved import Campaign, RegimeSpec, Study
from dataflex_rl.config.suggest import did_you_mean

_RESERVED_REGIMES = (FULL_DATA, UNTRAINED)


def transform_errors(regimes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A config's regimes whose transform is not in the registry (dataflex_rl.regimes): the study cannot be resolved
    without it, so the config's shape check holds it."""
    return [f"regimes.{name}: {problem}" for name, entry in regimes.items() if entry["transform"] not in REGIMES
            for problem in regime_errors(entry["transform"], {}, ())]


def _unknown(key: str, listed, declared: Mapping, what: str, extra=()) -> list[str]:
    known = [*extra, *declared]
    return [f"{key}: {name!r} is not {what}{did_you_mean(name, known)} (known: {', '.join(map(str, known))}); "
            f"declare it or remove it from the list" for name in listed if name not in known]


def _campaign_errors(campaign: Campaign, study: Study) -> list[str]:
    key = f"campaigns.{campaign.name}"
    regimes = [FULL_DATA if regime is None else regime for regime in campaign.regimes]
    errors = _unknown(f"{key}.models", campaign.models, study.declared_models, "a model of this study")
    errors += _unknown(f"{key}.methods", campaign.methods, study.methods, "a method of this study")
    errors += _unknown(f"{key}.regimes", regimes, study.regimes, "a regime of this study", (FULL_DATA,))
    controls = {method: study.methods[method].control if method in study.methods else None
                for method in campaign.methods}
    for method, control in controls.items():
        if control and control not in campaign.methods and method not in controls.values():
            errors.append(f"{key}.methods: {method!r} is compared with its control {control!r}, which this campaign "
                          f"does not train, and no method here is compared with {method!r}; add {control!r} to "
                          f"the list")
    return errors


def _validation_sizes(campaign: Campaign, study: Study) -> dict[str, int]:
    """The validation_size of each prompt-selection method the campaign trains that draws its validation prompts from
    the corpus (catalogue default filled in); one with its own `validation` file or benchmark draws none from it."""
    sizes = {}
    for method in campaign.methods:
        spec = study.methods.get(method)
        if spec is not None and spec.validation_from_corpus():
            sizes[method] = spec.resolved_params()["validation_size"]
    return sizes


def _least_share(target: int, others: int, size: int) -> float:
    """The smallest share (to 3 decimals) at which an unbalanced pool keeps `size` of `target` rows beside `others`."""
    share = min(1.0, math.ceil(1000 * size / (size + others)) / 1000)
    while pool_sizes_at_share(target, others, share)[0] < size and share < 1:
        share = min(1.0, round(share + 0.001, 3))
    return share


def _validation_pool_errors(campaign: Campaign, study: Study, workdir: Path) -> list[str]:
    """Every prompt selection holds out `validation_size` validation prompts drawn from the unbalanced pool's target
    domain only (prompt_selection.selector.RowLabels): a regime whose share keeps fewer target rows than that fails
    at train start. The bound is the corpus's most target rows (corpus_bound), so a refusal here is certain."""
    sizes = _validation_sizes(campaign, study)
    errors = []
    for regime in campaign.regimes if sizes else ():
        spec = study.regimes.get(regime)
        if not spec or spec.transform != "unbalanced" or _regime_problems(spec, study.corpus.domains):
            continue
        domain, share = spec.params["target_domain"], spec.params["share"]
        bound = domain_rows_bound(study.corpus, workdir, domain)
        if bound is None:
            continue  # a corpus file that cannot be counted: its own check names it
        target, others = bound
        kept = pool_sizes_at_share(target, others, share)[0]
        for method, size in sizes.items():
            if kept >= size:
                continue
            fixes = ([f"raise regimes.{regime}.share to at least {_least_share(target, others, size)} (with the "
                      f"other domains' {others} rows at most; the exact duplicates the corpus drops leave fewer, "
                      f"which need a larger share)"] if target >= size else
                     [f"add {domain} rows (corpus.sources, corpus.items_per_domain or corpus.files): the corpus holds "
                      f"at most {target}, so no share keeps {size}"])
            fixes += [f"lower methods.{method}.params.validation_size to at most {kept}"] if kept else []
            errors.append(f"regimes.{regime}.share: {share} keeps at most {kept} {domain} row(s) in the pool, fewer "
                          f"than the {size} validation prompts (validation_size) of methods.{method}, which "
                          f"campaigns.{campaign.name} trains on it: a prompt selection draws its validation prompts "
                          f"from the unbalanced pool's target domain only — " + ", or ".join(fixes))
    return errors


def _regime_problems(spec: RegimeSpec, domains: Sequence[str]) -> list[str]:
    """A regime's parameter problems, as the config writes them; `domains`: the corpus's (an unbalanced regime's
    target must be one of them)."""
    return regime_errors(spec.transform, spec.written, domains)


def campaign_errors(study: Study, workdir: Path = Path(".")) -> list[str]:
    """Every problem of the study's regimes and campaigns; corpus files are counted under `workdir`."""
    errors = [f"regimes.{name}: {problem}" for name, spec in study.regimes.items()
              for problem in _regime_problems(spec, study.corpus.domains)]
    errors += [f"regimes.{name}: the name {name!r} is reserved ({FULL_DATA!r}: the clean corpus, {UNTRAINED!r}: the "
               f"base model); rename the regime" for name in study.regimes if name in _RESERVED_REGIMES]
    for campaign in study.campaigns:
        if campaign.name is not None:
            errors += _campaign_errors(campaign, study)
            errors += _validation_pool_errors(campaign, study, workdir)
    return errors
