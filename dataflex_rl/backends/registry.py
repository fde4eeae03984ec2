"""The backends by name: where the study, the rules and the jobs look up a model's backend.

Apart from the seam (dataflex_rl.backends.base), which the backends' own modules import for its types: the registry
imports every backend, so an interface module holding it would import the backends that import it back. Importing
this module does not import torch (each backend imports it only when a job runs).
"""
from __future__ import annotations

from dataflex_rl.backends.base import Backend
from dataflex_rl.backends.embedded.backend import EmbeddedBackend
from dataflex_rl.backends.verl.backend import VerlBackend

BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (EmbeddedBackend(), VerlBackend())}


def get_backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(sorted(BACKENDS))}") from None
