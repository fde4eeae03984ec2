"""The data-policy taxonomy: selection, reweighting and mixture families behind one registry.

Importing the family modules registers their policies, so `build_response_policy` and `build_mixture` see them all.
docs/policies.md lists every policy, its parameters, defaults and released-code options.
"""
from . import mixture, reweighting, selection  # noqa: F401  (registration happens on import)
from .batch import GroupBatch
from .mixture import DomainMixture
from .registry import (
    PAPER,
    RELEASED,
    SEMANTICS,
    LossWeights,
    build_mixture,
    build_response_policy,
    list_policies,
    matched_random_mask,
    subset_group_advantages,
)

__all__ = [
    "DomainMixture", "GroupBatch", "LossWeights", "PAPER", "RELEASED", "SEMANTICS", "build_mixture",
    "build_response_policy", "list_policies", "matched_random_mask", "subset_group_advantages",
]
