"""A score job refuses, at its start and before it scores anything, a benchmark item whose prompt (in tokens after
the template) or gold answer is longer than the job's token caps (dataflex_rl/evaluate/benchmark_fit.py), naming the
benchmark's items file, the items and their lengths. The job is called through its rule entry point
(dataflex_rl.study.jobs.score_run, what workflow_scripts/score.py calls) with a real embedded base model.

As in tests/test_training_fit.py, every prompt and gold is digits after an empty template: the embedded tokenizer
spells each digit as its own token, so a text of n digits is n tokens, known without the tokenizer."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.evaluate.benchmark_fit import BenchmarkFitError, benchmark_token_caps
from dataflex_rl.study.jobs import score_run
from dataflex_rl.corpus.validation_settings import ValidationSettings
from dataflex_rl.artefacts.layout import PROVENANCE

from test_training_fit import DEFAULT_CAP, MODEL, TEMPLATE, _build, _corpus

BENCHMARKS = ValidationSettings.for_section("benchmarks")  # data_validation.benchmarks left out
MAX_NEW_TOKENS = 4  # evaluation.max_new_tokens: the default prompt cap is 64 positions − 4 = 60
DEFAULT_CAPS = benchmark_token_caps("models.tiny", MODEL, MAX_NEW_TOKENS, BENCHMARKS)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("score_fit")
    return _build(root, _corpus(root / "corpus.parquet", [5, 12, 20, 30, 60]), DEFAULT_CAP)


def _items(path: Path, prompt_digits: list[int], answer_digits: list[int] | None = None) -> str:
    """A benchmark's items file: prompts of `prompt_digits[i]` digits, golds of `answer_digits[i]` digits (or 1)."""
    answers = answer_digits or [1] * len(prompt_digits)
    rows = [{"id": f"{path.stem}-{i}", "benchmark": path.stem, "domain": "math", "source": "digits",
             "prompt": str(i % 10) * n, "answer": "7" * a, "answer_format": "exact", "metadata": "{}"}
            for i, (n, a) in enumerate(zip(prompt_digits, answers))]
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def _score(base: Path, root: Path, items: list[str], caps) -> list[Path]:
    outputs = [root / "scores" / Path(path).name for path in items]
    job = {"model": MODEL, "template": TEMPLATE,
           "evaluation": {"max_new_tokens": MAX_NEW_TOKENS, "batch_size": 8, "temperature": 0.0}}
    # each benchmark's slice holds its weights' slice: the base's, as test_training_fit._build records it
    score_run(job, [{"models.tiny": "test", "benchmark": Path(path).stem} for path in items], model_dir=str(base),
              model_provenance=str(base / PROVENANCE), items=items, outputs=[str(p) for p in outputs],
              provenance=[str(p.with_suffix(".json")) for p in outputs], token_caps=caps)
    return outputs


def test_the_default_prompt_cap_is_what_the_positions_leave_beside_an_answer():
    assert DEFAULT_CAPS.prompt["tokens"] == 60 and DEFAULT_CAPS.answer["tokens"] == 63
    assert benchmark_token_caps("models.qwen", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}, 8, BENCHMARKS) is None


def test_a_score_job_refuses_prompts_over_the_default_cap_naming_items_and_lengths(base, tmp_path):
    items = _items(tmp_path / "gsm8k.parquet", [10, 61, 8, 200, 60])
    with pytest.raises(BenchmarkFitError) as refused:
        _score(base, tmp_path, [items], DEFAULT_CAPS)
    assert (f"{items}: 2 of 5 prompts are longer than 60 tokens after the template "
            "(models.tiny.shape.max_position_embeddings 64 − evaluation.max_new_tokens 4, the default of "
            "data_validation.benchmarks.max_prompt_tokens): 'gsm8k-1' (61 tokens), 'gsm8k-3' (200 tokens).") \
        in str(refused.value)
    assert not (tmp_path / "scores").exists()


def test_a_score_job_checks_every_benchmark_before_it_scores_the_first(base, tmp_path):
    """The first benchmark fits a configured cap of 12 tokens, the second does not: nothing is scored, no shard kept."""
    fits, over = _items(tmp_path / "aiw.parquet", [3, 12]), _items(tmp_path / "math500.parquet", [4, 13, 30, 14, 15])
    caps = benchmark_token_caps("models.tiny", MODEL, MAX_NEW_TOKENS,
                                ValidationSettings.for_section("benchmarks", {"max_prompt_tokens": 12}))
    with pytest.raises(BenchmarkFitError) as refused:
        _score(base, tmp_path, [fits, over], caps)
    assert (f"{over}: 4 of 5 prompts are longer than 12 tokens after the template "
            "(data_validation.benchmarks.max_prompt_tokens): 'math500-1' (13 tokens), 'math500-2' (30 tokens), "
            "'math500-3' (14 tokens) and 1 more") in str(refused.value)
    assert not (tmp_path / "scores").exists()


def test_a_score_job_refuses_gold_answers_over_a_configured_cap(base, tmp_path):
    items = _items(tmp_path / "kk.parquet", [3, 4, 5], answer_digits=[2, 9, 3])
    caps = benchmark_token_caps("models.tiny", MODEL, MAX_NEW_TOKENS,
                                ValidationSettings.for_section("benchmarks", {"max_answer_tokens": 3}))
    with pytest.raises(BenchmarkFitError, match=r"1 of 3 gold answers are longer than 3 tokens as the tokenizer "
                                                r"spells them \(data_validation.benchmarks.max_answer_tokens\): "
                                                r"'kk-1' \(9 tokens\)\. "):
        _score(base, tmp_path, [items], caps)


def test_benchmarks_within_the_caps_are_scored(base, tmp_path):
    """Prompts at the default cap exactly (60 tokens) and golds at theirs pass and are scored, one record per item."""
    items = _items(tmp_path / "gcd.parquet", [60, 7, 1], answer_digits=[63, 1, 2])
    [scores] = _score(base, tmp_path, [items], DEFAULT_CAPS)
    assert pd.read_parquet(scores)["prompt_id"].tolist() == ["gcd-0", "gcd-1", "gcd-2"]
