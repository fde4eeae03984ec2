"""The data-policy taxonomy: selection, reweighting and mixture families behind one registry.

Importing the family modules registers their policies, so `build_response_policy` and `build_mixture` see them all.
They need torch, so they load on first use of a name below (PEP 562): `dataflex_rl.policies.catalogue` — every
policy's name, family and parameters as plain data — can then be imported, e.g. to validate a study config at
dry-run time, without importing torch. docs/policies.md lists every policy, its parameters, defaults and
released-code options.
"""
from importlib import import_module

_EXPORTS = {
    "DomainMixture": "mixture", "GroupBatch": "batch", "LossWeights": "registry", "PAPER": "registry",
    "RELEASED": "registry", "SEMANTICS": "registry", "build_mixture": "registry",
    "build_response_policy": "registry", "list_policies": "registry", "matched_random_mask": "registry",
    "subset_group_advantages": "registry",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for family in ("mixture", "reweighting", "selection"):  # registration happens on import
        import_module(f"{__name__}.{family}")
    value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
