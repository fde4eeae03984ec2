"""A tiny corpus and base model for the tests that train: built once per test module or session."""
from pathlib import Path

import pandas as pd
import torch

from dataflex_rl.backends.embedded.base_model import build_base_model
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.corpus.build import build_corpus

TEMPLATE = "{question}\nAnswer:"
SOURCES = ["syllogism", "basic_arithmetic", "kinematics"]
SHAPE = ModelShape(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, vocab_size=300)


def tiny_base(root: Path, warmup: WarmupSettings, items_per_domain: int, shape: ModelShape = SHAPE) -> pd.DataFrame:
    """Write `root/corpus.parquet` (one source per domain) and build `root/base` on it; return the corpus."""
    torch.set_num_threads(1)
    corpus, _ = build_corpus(SOURCES, items_per_domain, seed=1)
    corpus.to_parquet(root / "corpus.parquet")
    build_base_model(root / "corpus.parquet", root / "base", shape, warmup, TEMPLATE, progress=False)
    return corpus
