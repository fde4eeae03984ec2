"""The backends that build, train and score models: `embedded` (CPU, this package) and `verl` (GPU, planned).

The jobs around them — input verification, provenance, resumable-state keys — are backend-neutral and live in
dataflex_rl.study.jobs.
"""
