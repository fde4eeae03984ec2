"""A training corpus that does not fit its run is refused by the real jobs before anything trains: a prompt longer
than the token cap by the base model's build (the first job with the tokenizer) and at train start, a corpus smaller
than one step at train start. The jobs are called through their rule entry points (dataflex_rl.study.jobs, what
workflow_scripts/base_model.py and train.py call) with a real embedded model.

Every prompt here is digits after an empty template: the embedded tokenizer spells every digit as its own token, so a
prompt of n digits is n tokens, known without the tokenizer."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.study.jobs import build_base_model, train_run
from dataflex_rl.corpus.token_caps import TokenCaps, answer_token_cap
from dataflex_rl.corpus.training_fit import TRAINING_ANSWERS, TrainingCorpusError, corpus_token_caps, prompt_token_cap
from dataflex_rl.corpus.validation_settings import ValidationSettings

SHAPE = ModelShape(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=64, vocab_size=300)
MODEL = {"backend": "embedded", "shape": asdict(SHAPE), "warmup": asdict(WarmupSettings(steps=1, batch_size=2))}
TEMPLATE = "{question}"
MAX_NEW_TOKENS = 4
DEFAULT_CAP = prompt_token_cap("models.tiny", MODEL, MAX_NEW_TOKENS)  # 64 positions − 4 response tokens = 60
DEFAULT_ANSWER_CAP = answer_token_cap(TRAINING_ANSWERS, "models.tiny", MODEL)  # 64 positions − 1 end-of-text = 63


def _corpus(path: Path, digits: list[int], answer_digits: list[int] | None = None) -> Path:
    """A corpus of prompts of `digits[i]` digits each (as many tokens), all distinct; the gold answers are the row
    numbers, or `answer_digits[i]` digits each."""
    answers = [str(i) for i in range(len(digits))] if answer_digits is None else ["7" * n for n in answer_digits]
    rows = [{"id": f"row-{i}", "domain": "math", "source": "digits", "prompt": str(i % 10) * n, "answer": answer,
             "answer_format": "exact", "metadata": "{}"} for i, (n, answer) in enumerate(zip(digits, answers))]
    pd.DataFrame(rows).to_parquet(path)
    return path


def _build(root: Path, corpus: Path, cap, answer_cap=DEFAULT_ANSWER_CAP) -> Path:
    build_base_model({"model": MODEL, "template": TEMPLATE}, {"models.tiny": "test"}, corpus=corpus,
                     out_dir=root / "base", token_caps=TokenCaps(cap, answer_cap))
    return root / "base"


def _train(root: Path, base: Path, corpus: Path, cap, prompts_per_step: int) -> None:
    job = {"model": MODEL, "template": TEMPLATE, "seed": 1,
           "training": {"steps": 1, "prompts_per_step": prompts_per_step, "rollouts": 2,
                        "max_new_tokens": MAX_NEW_TOKENS},
           "method": {"name": "baseline", "policy": "baseline", "params": {}, "family": "none"}}
    train_run(job, {"seed": 1}, base=base, corpus=corpus, checkpoint_every=1, out_model=root / "run/model",
              out_metrics=root / "run/metrics.parquet", out_provenance=root / "run/provenance.json",
              state_dir=root / "run/state", token_caps=TokenCaps(cap, DEFAULT_ANSWER_CAP))


def test_a_models_training_caps_travel_as_one_value_from_its_corpus_section():
    defaults = ValidationSettings.for_section("corpus")
    assert corpus_token_caps("models.tiny", MODEL, MAX_NEW_TOKENS, defaults) == TokenCaps(
        {"tokens": 60, "source": "models.tiny.shape.max_position_embeddings 64 − training.max_new_tokens 4, the "
                                 "default of data_validation.corpus.max_prompt_tokens"},
        {"tokens": 63, "source": "models.tiny.shape.max_position_embeddings 64 − 1 end-of-text token, the default of "
                                 "data_validation.corpus.max_answer_tokens"})
    configured = corpus_token_caps("models.tiny", MODEL, MAX_NEW_TOKENS, ValidationSettings.for_section(
        "corpus", {"max_prompt_tokens": 30, "max_answer_tokens": 5, "max_prompt_chars": 100}))
    assert configured == TokenCaps({"tokens": 30, "source": "data_validation.corpus.max_prompt_tokens"},
                                   {"tokens": 5, "source": "data_validation.corpus.max_answer_tokens"})
    assert corpus_token_caps("models.qwen", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}, 8, defaults) is None


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A base built on prompts of 5 to 60 tokens: the longest exactly at the default cap passes."""
    root = tmp_path_factory.mktemp("fit")
    return _build(root, _corpus(root / "corpus.parquet", [5, 12, 20, 30, 60]), DEFAULT_CAP)


def test_the_default_cap_is_what_the_positions_leave_beside_the_response():
    assert DEFAULT_CAP["tokens"] == 60
    assert "models.tiny.shape.max_position_embeddings 64 − training.max_new_tokens 4" in DEFAULT_CAP["source"]
    assert prompt_token_cap("models.tiny", MODEL, MAX_NEW_TOKENS, configured=25) == {
        "tokens": 25, "source": "data_validation.corpus.max_prompt_tokens"}
    assert prompt_token_cap("models.qwen", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}, MAX_NEW_TOKENS) is None


def test_the_base_build_refuses_prompts_over_the_default_cap_with_their_lengths(tmp_path):
    corpus = _corpus(tmp_path / "corpus.parquet", [10, 61, 8, 200, 60])
    with pytest.raises(TrainingCorpusError) as refused:
        _build(tmp_path, corpus, DEFAULT_CAP)
    message = str(refused.value)
    assert f"{corpus}: 2 of 5 prompts are longer than 60 tokens after the template" in message
    assert "'row-1' (61 tokens), 'row-3' (200 tokens)" in message and "row-4" not in message
    assert "max_position_embeddings 64 − training.max_new_tokens 4" in message
    assert not (tmp_path / "base").exists()  # nothing half-built is left for a later job to pick up


def test_the_base_build_names_three_rows_and_counts_the_rest_under_a_configured_cap(tmp_path):
    corpus = _corpus(tmp_path / "corpus.parquet", [3, 4, 5, 6, 7, 8])
    with pytest.raises(TrainingCorpusError) as refused:
        _build(tmp_path, corpus, prompt_token_cap("models.tiny", MODEL, MAX_NEW_TOKENS, configured=3))
    message = str(refused.value)
    assert "5 of 6 prompts are longer than 3 tokens after the template (data_validation.corpus.max_prompt_tokens)" \
        in message
    assert "'row-1' (4 tokens), 'row-2' (5 tokens), 'row-3' (6 tokens) and 2 more" in message


def test_the_base_build_refuses_gold_answers_over_the_default_answer_cap_with_their_lengths(tmp_path):
    """Golds of 64 and 100 digits do not fit beside the end-of-text token in 64 positions; 63 digits do."""
    corpus = _corpus(tmp_path / "corpus.parquet", [5, 6, 7, 8, 9], answer_digits=[2, 64, 63, 100, 1])
    with pytest.raises(TrainingCorpusError) as refused:
        _build(tmp_path, corpus, DEFAULT_CAP, DEFAULT_ANSWER_CAP)
    message = str(refused.value)
    assert (f"{corpus}: 2 of 5 gold answers are longer than 63 tokens as the tokenizer spells them "
            "(models.tiny.shape.max_position_embeddings 64 − 1 end-of-text token, the default of "
            "data_validation.corpus.max_answer_tokens): 'row-1' (64 tokens), 'row-3' (100 tokens).") in message
    assert "or set data_validation.corpus.max_answer_tokens" in message
    assert not (tmp_path / "base").exists()


def test_the_base_build_counts_every_gold_answer_over_a_configured_answer_cap(tmp_path):
    corpus = _corpus(tmp_path / "corpus.parquet", [5] * 7, answer_digits=[1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(TrainingCorpusError) as refused:
        _build(tmp_path, corpus, DEFAULT_CAP, answer_token_cap(TRAINING_ANSWERS, "models.tiny", MODEL, configured=2))
    assert ("5 of 7 gold answers are longer than 2 tokens as the tokenizer spells them "
            "(data_validation.corpus.max_answer_tokens): 'row-2' (3 tokens), 'row-3' (4 tokens), 'row-4' (5 tokens) "
            "and 2 more") in str(refused.value)


def test_train_start_refuses_a_regime_corpus_over_a_cap_the_base_build_passed(base, tmp_path):
    """The base was built under the default cap; a run capped at 25 tokens (or a regime's corpus) is checked again."""
    corpus = _corpus(tmp_path / "regime.parquet", [5, 12, 30])
    with pytest.raises(TrainingCorpusError, match=r"1 of 3 prompts are longer than 25 tokens .*'row-2' \(30 tokens\)"):
        _train(tmp_path, base, corpus, prompt_token_cap("models.tiny", MODEL, MAX_NEW_TOKENS, configured=25), 2)
    assert not (tmp_path / "run/model").exists()


@pytest.mark.parametrize("rows, prompts_per_step, fix", [
    (3, 4, "lower training.prompts_per_step to at most 3, or raise corpus.items_per_domain"),
    (0, 2, "more than once — raise corpus.items_per_domain"),
])
def test_train_start_refuses_a_corpus_smaller_than_one_step(base, tmp_path, rows, prompts_per_step, fix):
    """What training sees, after de-duplication, decontamination and a regime: here 3 rows, or none at all."""
    corpus = _corpus(tmp_path / "clean.parquet", [5] * rows)
    with pytest.raises(TrainingCorpusError) as refused:
        _train(tmp_path, base, corpus, DEFAULT_CAP, prompts_per_step)
    assert (f"training.prompts_per_step: {prompts_per_step} > the {rows} rows of the training corpus {corpus}"
            in str(refused.value))
    assert fix in str(refused.value)


def test_a_corpus_that_fits_trains(base, tmp_path):
    """Prompts up to the cap and exactly one step's worth of rows pass both checks and train."""
    _train(tmp_path, base, _corpus(tmp_path / "clean.parquet", [5, 60]), DEFAULT_CAP, 2)
    assert len(pd.read_parquet(tmp_path / "run/metrics.parquet")) == 1
