"""Data regimes: seeded, deterministic corpus and reward transforms applied between decontamination and training.

One module per transform, and the registry (`registry.REGIMES`, `registry.apply_regime`) the pipeline calls.
docs/regimes.md states each transform's exact semantics and what its record and audit hold.
"""
