"""The embedded backend's model settings, with their defaults: torch-free, so that the study resolves them at
dry-run time (dataflex_rl.study.resolved)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 512
    vocab_size: int = 512


@dataclass(frozen=True)
class WarmupSettings:
    steps: int = 600
    batch_size: int = 32
    learning_rate: float = 2e-3
    seed: int = 0
