"""The data-policy taxonomy: selection, reweighting, mixture and prompt-selection families behind one registry.

Every policy is declared once, by its entry in `dataflex_rl.policies.catalogue` (name, family, signal, parameters
with defaults and ranges, as plain data); its implementation in a family module registers under that name. The family
modules need torch, so this package imports them — registering every policy — on first use of a name below (PEP 562):
the catalogue can then be imported, e.g. to validate a study config at dry-run time, without importing torch.
docs/policies.md lists every policy, its parameters, defaults and released-code options.
"""
from importlib import import_module

_EXPORTS = {
    "DomainMixture": "mixture", "GroupBatch": "batch", "LossWeights": "weights", "build_mixture": "registry",
    "build_prompt_selection": "registry", "build_response_policy": "registry", "list_policies": "registry",
    "matched_random_mask": "controls", "subset_group_advantages": "controls",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .catalogue import Family

    for family in Family:  # registration happens on import
        if family.module:
            import_module(f"{__name__}.{family.module}")
    missing = import_module(f"{__name__}.registry").unimplemented()
    if missing:
        raise ImportError(f"catalogued policies {missing} have no implementation: register one in their family's "
                          "module with @policy(name) (dataflex_rl/policies/registry.py)")
    value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
