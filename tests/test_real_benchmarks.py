"""The paper's 12 real benchmarks on hand-written fixtures in their native schemas (tests/fixtures/benchmarks/):
loaders, templates, extraction of realistic answers, parse failures, calibration, GPQA's option shuffle and the
authors' seeded subsets. Every gold below was worked out by hand from the fixture's question."""
import json
import random
import sys
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.backends.embedded.model import train_tokenizer
from dataflex_rl.item_sources.loaders import BenchmarkSizeWarning, local_source, native_items, paper_subset, read_table
from dataflex_rl.item_sources.readers import BenchmarkSchemaError
from dataflex_rl.item_sources.registry import PAPER_BENCHMARKS, get_benchmark
from dataflex_rl.formats import get_format
from dataflex_rl.formats.base import NO_ANSWER, Verdict
from dataflex_rl.artefacts.items import BENCHMARK_ITEM_COLUMNS, item_metadata
from dataflex_rl.corpus.build import benchmark_items, load_benchmark_file
from dataflex_rl.corpus.prompting import render_item_prompt, render_prompt
from dataflex_rl.verify.calibration import CalibrationError, calibrate_benchmark
from dataflex_rl.verify.verifiers import get_verifier

pytestmark = pytest.mark.filterwarnings("ignore::dataflex_rl.item_sources.loaders.BenchmarkSizeWarning")

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
FILES = {
    "MATH-500": "math500.jsonl",
    "AIME-2024": "aime2024.jsonl",
    "OlympiadBench": "olympiadbench.jsonl",
    "Minerva-Math": "minerva_math.jsonl",
    "GSM8K": "gsm8k_test.jsonl",
    "Knights&Knaves": "knights_knaves_hard.jsonl",
    "BBH-logical-deduction": "bbh_logical_deduction.jsonl",
    "BBH-tracking-shuffled-objects": "bbh_tracking_shuffled_objects.jsonl",
    "ZebraLogic": "zebralogic_mc.jsonl",
    "MMLU-Pro-chemistry": "mmlu_pro_chemistry.jsonl",
    "MMLU-Pro-physics": "mmlu_pro_physics.jsonl",
    "GPQA-Diamond": "gpqa_diamond.jsonl",
}
# The golds the loaders must produce, worked out by hand (GPQA's letters depend on the shuffle: checked by text below).
GOLDS = {
    "MATH-500": ["\\frac{1}{2}", "7", "\\text{Evelyn}", "2\\sqrt{2}"],
    "AIME-2024": ["24", "30", "19"],
    "OlympiadBench": ["2,3", "55", "\\frac{1}{2}"],
    "Minerva-Math": ["9", "10", "6 \\times 10^{2}"],
    "GSM8K": ["1250", "7", "9"],
    "Knights&Knaves": ["Mira is a knight, Tobias is a knave", "Ada is a knave, Bruno is a knight, Cleo is a knave",
                       "Ada is a knight, Bruno is a knight, Cleo is a knave"],
    "BBH-logical-deduction": ["(C)", "(B)", "(C)"],
    "BBH-tracking-shuffled-objects": ["(C)", "(B)", "(A)"],
    "ZebraLogic": ["A", "B", "C"],
    "MMLU-Pro-chemistry": ["B", "B", "C"],  # the physics row is filtered out; 'N/A' dropped, so D becomes C
    "MMLU-Pro-physics": ["B", "A", "D"],
    "GPQA-Diamond": None,
}
# Realistic ways a model states the first item's gold ({L}: GPQA's shuffled letter), and wrong answers.
RIGHT = {
    "MATH-500": ["\\boxed{\\frac{1}{2}}", "0.5", "$\\frac12$", "The answer is 1/2.", "Final Answer: \\boxed{0.5}",
                 "We subtract: $\\frac34-\\frac14=\\frac24$.\nSo the answer is $\\boxed{\\dfrac{1}{2}}$."],
    "AIME-2024": ["\\boxed{24}", "24", "The answer is $24$.",
                  "Final Answer: The final answer is 24. I hope it is correct.",
                  "$2^{10}=1024$, so the remainder is\n\\boxed{024}"],
    "OlympiadBench": ["\\boxed{2,3}", "\\boxed{3, 2}", "$2, 3$",
                      "Final Answer: The final answer is $2,3$. I hope it is correct.",
                      "Factoring gives $(x-2)(x-3)=0$, so\n\\boxed{x = 2, x = 3}"],
    "Minerva-Math": ["\\boxed{9}", "9", "9.0", "Final Answer: The final answer is 9. I hope it is correct.",
                     "$E = \\frac{1}{2} m v^2$, so the answer is $9$.", "\\boxed{9 \\text{ J}}"],
    "GSM8K": ["1250", "\\boxed{1250}", "The answer is 1,250.", "He sells 25 * 50 = 1250 loaves.\nThe answer is 1250.",
              "Final Answer: \\boxed{1,250}", "\\boxed{1250.00}"],
    "Knights&Knaves": ["Mira is a knight, and Tobias is a knave.", "CONCLUSION:\n(1) Mira is a knight\n(2) Tobias is a knave",
                       "Tobias is a knave and Mira is a knight.",
                       "Suppose Mira is a knave; then Tobias is a knight and his claim fails.\n"
                       "CONCLUSION: Mira is a knight. Tobias is a knave.",
                       "Mira: knight\nTobias: knave"],
    "BBH-logical-deduction": ["(C)", "C", "So the answer is (C).", "The answer is C.", "The green book is the leftmost",
                              "Answer: (C) The green book is the leftmost"],
    "BBH-tracking-shuffled-objects": ["(C)", "C", "So the answer is (C).", "green ball",
                                      "After both swaps Bob holds the green ball.\nSo the answer is (C) green ball."],
    "ZebraLogic": ["A", "(A)", "The answer is (A).", "Arnold", "The answer is: Arnold",
                   "Eric cannot live in house 1, so the answer is A."],
    "MMLU-Pro-chemistry": ["B", "(B)", "The answer is (B).", "B) 18", "The answer is 18.",
                           "Water is 2(1) + 16 = 18 g/mol.\nAnswer: B"],
    "MMLU-Pro-physics": ["B", "The answer is (B).", "B) 6 N", "6 N", "F = ma = 6 N, so the answer is (B)"],
    "GPQA-Diamond": ["{L}", "({L})", "The answer is ({L}).", "{L}) 2.0 eV", "2.0 eV",
                     "E = hc / wavelength = 1240 eV nm / 620 nm.\nThe answer is 2.0 eV."],
}
WRONG = {
    "MATH-500": ["\\boxed{\\frac{1}{4}}", "The answer is 0.25.", "Final Answer: 2"],
    "AIME-2024": ["\\boxed{1024}", "The answer is 23."],
    "OlympiadBench": ["\\boxed{2}", "\\boxed{2,4}"],
    "Minerva-Math": ["\\boxed{18}", "The answer is 4.5."],
    "GSM8K": ["\\boxed{1200}", "The answer is 125."],
    "Knights&Knaves": ["Mira is a knave, and Tobias is a knight.", "CONCLUSION: Mira is a knight. Tobias is a knight.",
                       "Mira is a knight."],
    "BBH-logical-deduction": ["(A)", "So the answer is (B).", "The red book is the leftmost"],
    "BBH-tracking-shuffled-objects": ["(A)", "red ball"],
    "ZebraLogic": ["B", "The answer is Eric."],
    "MMLU-Pro-chemistry": ["A", "The answer is 16.", "(C)"],
    "MMLU-Pro-physics": ["C", "9 N"],
    "GPQA-Diamond": ["The answer is 3.1 eV.", "1.0 eV"],
}
NAMES = sorted(FILES)


def _items(name: str) -> pd.DataFrame:
    return load_benchmark_file(get_benchmark(name), FIXTURES / FILES[name])


def _first(name: str) -> dict:
    return _items(name).iloc[0].to_dict()


def _letter_of(item: dict, text: str) -> str:
    return "ABCD"[item_metadata(item)["options"].index(text)]


def test_every_paper_benchmark_has_a_fixture_and_a_native_schema():
    assert set(FILES) == set(PAPER_BENCHMARKS)
    for benchmark in PAPER_BENCHMARKS.values():
        assert benchmark.reader.columns and benchmark.hub and get_format(benchmark.answer_format).template
        assert benchmark.evaluated_size is not None and benchmark.size >= benchmark.evaluated_size


@pytest.mark.parametrize("name", NAMES)
def test_loader_reads_the_native_schema(name):
    items = _items(name)
    assert list(items.columns) == list(BENCHMARK_ITEM_COLUMNS) and items["id"].is_unique
    assert set(items["benchmark"]) == {name} and set(items["answer_format"]) == {get_benchmark(name).answer_format}
    if GOLDS[name] is not None:
        assert items["answer"].tolist() == GOLDS[name]
    else:  # GPQA: the gold letter must point at the 'Correct Answer' text, whatever the shuffle
        correct = read_table(FIXTURES / FILES[name])["Correct Answer"].tolist()
        assert [_letter_of(row, text) for row, text in zip(items.to_dict("records"), correct)] == items["answer"].tolist()
    assert [item_metadata(row)["source_index"] for row in items.to_dict("records")] == sorted(
        item_metadata(row)["source_index"] for row in items.to_dict("records"))


@pytest.mark.parametrize("name", NAMES)
def test_a_file_without_a_native_column_is_an_error_naming_file_column_and_schema(name, tmp_path):
    column = get_benchmark(name).reader.columns[0]
    path = tmp_path / "renamed.jsonl"
    read_table(FIXTURES / FILES[name]).rename(columns={column: "text"}).to_json(path, orient="records", lines=True)
    with pytest.raises(BenchmarkSchemaError, match=rf"{path}.*lacks column\(s\) \['{column}'\].*native schema"):
        load_benchmark_file(get_benchmark(name), path)


@pytest.mark.parametrize("name", NAMES)
def test_template_asks_for_the_answer_in_the_extractors_form(name):
    item = _first(name)
    prompt = render_item_prompt(item, "{question}\nAnswer:")
    assert prompt.startswith(item["prompt"]) and not prompt.endswith("Answer:")
    answer_format = get_benchmark(name).answer_format
    expected = {"math": "\\boxed{}", "multiple_choice": "Answer with the letter of the correct option",
                "knights_knaves": '"X is a knight"', "exact": "So the answer is (X)"}[answer_format]
    assert expected in prompt
    if answer_format == "multiple_choice":
        options = item_metadata(item)["options"]
        assert f"A) {options[0]}\nB) {options[1]}" in prompt


def _chat_tokenizer():
    tokenizer = train_tokenizer(["What is 2+3?\nAnswer: 5", "Zoey is a knight"], vocab_size=300)
    tokenizer.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                               "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    return tokenizer


def test_chat_template_wraps_one_user_turn_and_the_embedded_tokenizer_changes_nothing():
    item = _first("GSM8K")
    text = render_item_prompt(item, "{question}")
    assert render_item_prompt(item, "{question}", _chat_tokenizer()) == f"<|user|>{text}<|end|><|assistant|>"
    plain_tokenizer = train_tokenizer(["What is 2+3?\nAnswer: 5"], vocab_size=300)
    procedural = benchmark_items("chain_sum", n_items=3, seed=1000).iloc[0].to_dict()
    template = "{question}\nAnswer:"
    assert render_item_prompt(procedural, template, plain_tokenizer) == procedural["prompt"] + "\nAnswer:"
    assert render_prompt(procedural["prompt"], template, plain_tokenizer) == render_prompt(procedural["prompt"], template)


@pytest.mark.parametrize("name", NAMES)
def test_realistic_correct_answers_score_one(name):
    item = _first(name)
    letter = item["answer"]
    verifier = get_verifier(item["answer_format"])
    assert len(RIGHT[name]) >= 5
    for response in RIGHT[name]:
        assert verifier(response.replace("{L}", letter), item) == Verdict(True, True), response


@pytest.mark.parametrize("name", NAMES)
def test_wrong_answers_score_zero_and_missing_answers_are_parse_failures(name):
    item = _first(name)
    verifier = get_verifier(item["answer_format"])
    for response in WRONG[name]:
        assert verifier(response, item) == Verdict(True, False), response
    for response in (*NO_ANSWER, "I think it is hard to say."):
        assert verifier(response, item) == Verdict(False, False), response


@pytest.mark.parametrize("name", NAMES)
def test_calibration_passes_on_every_fixture(name):
    report = calibrate_benchmark(name, _items(name))
    assert report["failures"] == 0 and report["gold_checked"] >= 5 * report["items"]
    assert report["gold_parsed"] == report["gold_checked"] and report["no_answer_checked"] == 3 * report["items"]


@pytest.mark.parametrize("name", ["MATH-500", "AIME-2024", "OlympiadBench", "Minerva-Math", "GSM8K"])
def test_a_math_benchmark_scored_with_the_multiple_choice_extractor_fails_calibration(name):
    items = _items(name).assign(answer_format="multiple_choice")
    with pytest.raises(CalibrationError, match=rf"benchmark '{name}' \(format multiple_choice\): the "
                                               r"multiple_choice extractor parsed none of the \d+ gold answers "
                                               r"written as math answers"):
        calibrate_benchmark(name, items)


def test_gpqa_shuffle_is_seeded_per_item_and_recorded(tmp_path):
    items = _items("GPQA-Diamond")
    raw = read_table(FIXTURES / FILES["GPQA-Diamond"])
    reversed_path = tmp_path / "reversed.jsonl"
    raw.iloc[::-1].to_json(reversed_path, orient="records", lines=True)
    again = load_benchmark_file(get_benchmark("GPQA-Diamond"), reversed_path).set_index("id")
    for row, source in zip(items.to_dict("records"), raw.to_dict("records")):
        metadata = item_metadata(row)
        assert metadata["options"] == [source[column] for column in metadata["option_sources"]]
        assert sorted(metadata["option_sources"]) == ["Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2",
                                                      "Incorrect Answer 3"]
        # the same item gets the same letters whatever the file's row order
        assert item_metadata(again.loc[row["id"]].to_dict())["options"] == metadata["options"]
        assert again.loc[row["id"], "answer"] == row["answer"]
    assert len({tuple(item_metadata(r)["option_sources"]) for r in items.to_dict("records")}) > 1


def _mmlu_rows(n: int, category: str = "chemistry") -> pd.DataFrame:
    return pd.DataFrame({"question_id": range(n), "question": [f"Question {i}?" for i in range(n)],
                         "options": [["1", "2", "3", "4"]] * n, "answer": ["C"] * n, "answer_index": [2] * n,
                         "category": [category] * n})


def test_the_authors_seeded_subset_is_drawn_from_a_larger_source():
    benchmark = get_benchmark("MMLU-Pro-chemistry")
    source = pd.concat([_mmlu_rows(1132), _mmlu_rows(40, "physics")], ignore_index=True)
    items = native_items(benchmark, source, "a test frame")
    positions = [item_metadata(row)["source_index"] for row in items.to_dict("records")]
    shuffled = list(range(1132))
    random.Random(42).shuffle(shuffled)
    assert len(items) == 500 and positions == sorted(shuffled[:500])
    assert items["id"].tolist() == [str(p) for p in positions]
    assert paper_subset(300, benchmark) == list(range(300))  # a file already at or below the size is kept whole
    assert paper_subset(800, get_benchmark("GSM8K")) == list(range(800))  # no subset for a benchmark scored whole


def test_a_size_other_than_the_authors_is_warned_about():
    with pytest.warns(BenchmarkSizeWarning, match="3 items .* the paper's authors scored 1319"):
        load_benchmark_file(get_benchmark("GSM8K"), FIXTURES / FILES["GSM8K"])


def test_aime_variant_schema_with_capitalised_columns(tmp_path):
    path = tmp_path / "aime.jsonl"
    rows = [{"ID": "2024-I-1", "Problem": "Compute $6 \\cdot 7$.", "Solution": "$42$.", "Answer": 42}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_benchmark_file(get_benchmark("AIME-2024"), path)
    assert items[["id", "prompt", "answer"]].values.tolist() == [["2024-I-1", "Compute $6 \\cdot 7$.", "42"]]


def test_parquet_files_with_list_columns_load_like_jsonl(tmp_path):
    path = tmp_path / "kk.parquet"
    read_table(FIXTURES / FILES["Knights&Knaves"]).to_parquet(path)
    assert load_benchmark_file(get_benchmark("Knights&Knaves"), path)["answer"].tolist() == GOLDS["Knights&Knaves"]


def test_hub_fallback_needs_the_optional_datasets_package(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if `pip install 'dataflex-rl[hub]'` had not been run
    with pytest.raises(ImportError, match=r"benchmark 'GSM8K': loading openai/gsm8k .*dataflex-rl\[hub\]"):
        benchmark_items("GSM8K", n_items=0, seed=0, path=None, hub_fallback=True)
    missing = str(tmp_path / "absent.jsonl")
    with pytest.raises(ImportError, match="openai/gsm8k"):
        benchmark_items("GSM8K", n_items=0, seed=0, path=missing, hub_fallback=True)
    with pytest.raises(FileNotFoundError, match="hub_fallback: true to load openai/gsm8k"):
        benchmark_items("GSM8K", n_items=0, seed=0, path=missing)
    present = str(FIXTURES / FILES["GSM8K"])
    assert local_source(missing, hub_fallback=True) is None and local_source(missing, hub_fallback=False) == missing
    assert local_source(present, hub_fallback=True) == present


def test_scoring_renders_real_items_with_their_template_and_reports_parse_failures(tmp_path):
    """The real embedded scorer on every fixture: a barely trained model's short responses state no answer, and the
    records say so (parsed False) instead of hiding them among wrong answers."""
    from dataflex_rl.backends.embedded.base_model import build_base_model
    from dataflex_rl.backends.embedded.generation import EmbeddedGenerator
    from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
    from dataflex_rl.evaluate.scoring import score_items
    from dataflex_rl.corpus.build import build_corpus

    corpus, _ = build_corpus(["basic_arithmetic", "syllogism", "kinematics"], 30, seed=1)
    corpus.to_parquet(tmp_path / "corpus.parquet")
    shape = ModelShape(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=1, vocab_size=384)
    build_base_model(tmp_path / "corpus.parquet", tmp_path / "base", shape, WarmupSettings(steps=1, batch_size=4),
                     "{question}\nAnswer:", progress=False)
    items = pd.concat([_items(name) for name in NAMES], ignore_index=True)
    scores = score_items(EmbeddedGenerator.load(tmp_path / "base"), items, "{question}\nAnswer:", max_new_tokens=3)
    assert scores["prompt_id"].tolist() == items["id"].tolist()
    verdicts = [get_verifier(i["answer_format"])(r, i) for i, r in zip(items.to_dict("records"), scores["response"])]
    assert scores["parsed"].tolist() == [v.parsed for v in verdicts]
    assert (~scores["parsed"]).sum() > 0 and not scores["correct"][~scores["parsed"]].any()
