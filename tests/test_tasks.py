"""Procedural tasks: the science generator, the registry's domain balance, corpus de-duplication, file loading."""
import json
import random

import pandas as pd
import pytest

from dataflex_rl.item_sources.loaders import BenchmarkSizeWarning
from dataflex_rl.item_sources.registry import EMBEDDED_BENCHMARKS, PAPER_BENCHMARKS, get_benchmark
from dataflex_rl.item_sources.science import generate_science, science_question
from dataflex_rl.artefacts.items import LETTERS
from dataflex_rl.corpus.build import benchmark_items, build_corpus, drop_exact_duplicates, load_benchmark_file


def _option_value(item: dict, letter: str) -> float:
    return float(json.loads(json.dumps(item["metadata"]))["options"][LETTERS.index(letter)])


def test_science_gold_letter_points_at_the_computed_answer():
    # Kinematics: distance = speed × time, read back from the question text.
    for item in generate_science("kinematics", 50, seed=3):
        words = item["question"].split()
        speed, time = int(words[words.index("m/s") - 1]), int(words[words.index("s.") - 1])
        assert _option_value(item, item["answer"]) == speed * time
    # Molar mass of water is 2·1 + 16 = 18 g/mol in the generator's table.
    rng = random.Random(0)
    for _ in range(200):
        item = science_question("molar_mass", rng)
        if "H2O" in item["question"]:
            assert _option_value(item, item["answer"]) == 18
            break
    else:
        pytest.fail("no H2O question drawn in 200 tries")


def test_science_items_have_four_distinct_lettered_options_and_are_deterministic():
    first = generate_science("unit_conversion", 30, seed=5)
    assert first == generate_science("unit_conversion", 30, seed=5)
    assert first != generate_science("unit_conversion", 30, seed=6)
    for item in first:
        lines = item["question"].splitlines()
        assert [line[:2] for line in lines[1:]] == ["A)", "B)", "C)", "D)"]
        assert len(set(item["metadata"]["options"])) == 4


def test_registry_has_five_math_four_logic_three_science_in_both_suites():
    for suite in (EMBEDDED_BENCHMARKS, PAPER_BENCHMARKS):
        domains = pd.Series([b.domain for b in suite.values()]).value_counts().to_dict()
        assert domains == {"math": 5, "logic": 4, "science": 3}
    assert get_benchmark("GPQA-Diamond").size == 198
    with pytest.raises(ValueError, match="unknown benchmark 'MATH-5000'"):
        get_benchmark("MATH-5000")


def test_corpus_is_balanced_and_free_of_exact_duplicate_prompts():
    corpus, audit = build_corpus(["basic_arithmetic", "products", "syllogism", "kinematics"], 120, seed=2)
    assert not corpus["prompt"].str.strip().duplicated().any()
    assert set(corpus.columns) == {"id", "domain", "source", "prompt", "answer", "answer_format", "metadata"}
    assert audit["rows"] == len(corpus)
    dropped = sum(s["duplicates_dropped"] for s in audit["sources"].values()) + audit["cross_source_duplicates_dropped"]
    assert dropped == 60 + 60 + 120 + 120 - len(corpus)
    assert set(corpus["answer_format"]) == {"procedural", "multiple_choice"}


def test_drop_exact_duplicates_keeps_first_occurrence():
    frame = pd.DataFrame({"prompt": ["a", "b", " a ", "c", "b"], "id": [1, 2, 3, 4, 5]})
    kept, dropped = drop_exact_duplicates(frame)
    assert kept["id"].tolist() == [1, 2, 4] and dropped == 2


def test_procedural_benchmark_items_are_distinct_and_sized():
    items = benchmark_items("chain_sum", n_items=40, seed=1000)
    assert len(items) == 40 and items["prompt"].is_unique and set(items["benchmark"]) == {"chain_sum"}


def test_real_benchmark_loads_from_a_local_jsonl_with_its_own_column_names(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    pd.DataFrame({"question": ["What is 2+3?", "What is 4*5?"], "answer": ["5", "20"]}).to_json(
        path, orient="records", lines=True)
    with pytest.warns(BenchmarkSizeWarning, match="2 items from .*gsm8k.jsonl; the paper's authors scored 1319"):
        items = load_benchmark_file(get_benchmark("GSM8K"), path)
    assert items["prompt"].tolist() == ["What is 2+3?", "What is 4*5?"]
    assert set(items["answer_format"]) == {"math"} and set(items["domain"]) == {"math"}
    with pytest.raises(FileNotFoundError, match="benchmark 'GSM8K'"):
        load_benchmark_file(get_benchmark("GSM8K"), tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError, match="benchmarks.files.GSM8K"):
        benchmark_items("GSM8K", n_items=10, seed=0)
