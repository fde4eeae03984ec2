"""What the dry run knows of a job's size, against the real thing: the corpus bound against the corpus built, the
parameter count against the model built, and the memory estimate against the measured peak of real embedded train
and score jobs (benchmarks/embedded_memory.py runs each in a fresh process)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from dataflex_rl.backends.embedded.memory import parameter_count, score_peak_mb, train_peak_mb
from dataflex_rl.backends.embedded.settings import ModelShape
from dataflex_rl.study.corpus_bound import corpus_rows_bound
from dataflex_rl.study.resolved import CorpusSettings
from dataflex_rl.corpus.build import build_corpus

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("embedded_memory", REPO / "benchmarks/embedded_memory.py")
embedded_memory = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(embedded_memory)

SOURCES = ["basic_arithmetic", "chain_sum", "products", "gcd", "simple_equations", "syllogism", "family_relationships",
           "aiw", "letter_counting", "unit_conversion", "molar_mass", "kinematics"]


def _corpus(items_per_domain: int, files=()) -> CorpusSettings:
    return CorpusSettings(tuple(SOURCES), items_per_domain, seed=1, files=tuple(files))


@pytest.mark.parametrize("items_per_domain, bound", [(10, 5 * 2 + 4 * 3 + 3 * 4), (60, 180), (7, 5 * 2 + 4 * 2 + 3 * 3)])
def test_corpus_bound_counts_every_drawn_item_and_bounds_the_built_corpus(items_per_domain, bound):
    rows, _ = corpus_rows_bound(_corpus(items_per_domain), Path("."), needed=10**9)
    corpus, audit = build_corpus(SOURCES, items_per_domain, seed=1)
    assert rows == bound == sum(source["generated"] for source in audit["sources"].values())
    assert len(corpus) <= rows


def test_corpus_files_count_their_rows_only_when_the_sources_fall_short(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"prompt": "p1", "answer": "1"}\n\n{"prompt": "p2", "answer": "2"}\n'
                                      '{"prompt": "p3", "answer": "3"}')
    pd.DataFrame({"prompt": [f"q{i}" for i in range(11)], "answer": ["1"] * 11}).to_parquet(tmp_path / "b.parquet")
    files = [{"path": "a.jsonl"}, {"path": "b.parquet"}]
    rows, made_of = corpus_rows_bound(_corpus(10, files), tmp_path, needed=10**9)
    assert rows == 34 + 3 + 11
    assert made_of.endswith("corpus.files[0] 'a.jsonl': 3; corpus.files[1] 'b.parquet': 11")
    assert corpus_rows_bound(_corpus(10, files), tmp_path, needed=34) == (34, made_of.split(";")[0])
    (tmp_path / "b.parquet").write_text("not parquet")
    assert corpus_rows_bound(_corpus(10, files), tmp_path, needed=10**9) is None  # its own check reports it


@pytest.mark.parametrize("shape", [ModelShape(), ModelShape(hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                                            num_attention_heads=8, num_key_value_heads=2,
                                                            vocab_size=1000),
                                   ModelShape(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                                              vocab_size=100)])
def test_parameter_count_is_the_built_models(shape):
    config = Qwen2Config(vocab_size=max(shape.vocab_size, 258), hidden_size=shape.hidden_size,
                         intermediate_size=shape.intermediate_size, num_hidden_layers=shape.num_hidden_layers,
                         num_attention_heads=shape.num_attention_heads, num_key_value_heads=shape.num_key_value_heads,
                         max_position_embeddings=shape.max_position_embeddings, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    assert parameter_count(shape) == sum(p.numel() for p in model.parameters())


def test_estimates_grow_with_the_batch_and_the_lengths():
    shape = ModelShape()
    assert (train_peak_mb(shape, 8, 5, 8, 200) < train_peak_mb(shape, 16, 5, 8, 200)
            < train_peak_mb(shape, 16, 5, 32, 200) < train_peak_mb(shape, 16, 5, 32, 400))
    assert score_peak_mb(shape, 64, 8, 200) < score_peak_mb(shape, 128, 8, 200) < score_peak_mb(shape, 128, 8, 400)


# One small, one default-shaped and one wide shape per job; each measurement takes a few seconds.
MEASURED = [embedded_memory.CALIBRATION[i] for i in (0, 2, 3, 5, 6)]


@pytest.mark.parametrize("job, spec", MEASURED, ids=[f"{job}-{json.dumps(spec['shape']['hidden_size'])}h"
                                                     for job, spec in MEASURED])
def test_memory_estimate_bounds_the_measured_peak_within_a_factor_of_two(job, spec):
    measured = embedded_memory.measure(job, spec)["peak_mb"]
    estimate = embedded_memory.estimate_mb(job, spec)
    assert measured <= estimate <= 2 * measured, (measured, estimate)
