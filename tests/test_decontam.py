"""Decontamination: planted copies are removed, template siblings that differ in their numbers are kept."""
import json

import pandas as pd
import pytest

from dataflex_rl.corpus.decontam import decontaminate, decontaminate_files, normalize_text

WORD_PROBLEM = (
    "Maria has 37 marbles. Her brother gives her 15 more marbles, and then she loses 8 marbles while playing in the "
    "park with her friends after school. Later she buys 3 bags with 12 marbles in each bag. "
    "How many marbles does Maria have now?"
)
ACCELERATION = (
    "A car starts from rest on a straight, level road and accelerates uniformly until it reaches a speed of 20 m/s "
    "after 5 s, while the driver keeps the steering wheel fixed. What is the magnitude of its acceleration?\n"
    "A) 2 m/s^2\nB) 4 m/s^2\nC) 5 m/s^2\nD) 100 m/s^2"
)
FAMILY = ("George is married to Sophia. They have a child called Robert. Robert has a sister called Emma.\n\n"
          "What relation is Sophia to Robert? Answer with a single word.")
BENCHMARK_ITEMS = [
    ("gsm8k", "gsm8k-0", WORD_PROBLEM),
    ("arithmetic", "arith-0", "What is 23 + 45? Give only the final integer."),
    ("letter_counting", "lc-0", 'How many times does the letter "r" appear in the text: "the strawberry farmer carried ripe berries"?'),
    ("syllogism", "syl-0", "Consider these statements:\n1. All whales are mammals\n2. Some mammals are pets\n\n"
     "Does it logically follow that:\nSome whales are pets?\n(Answer Yes or No)"),
    ("mmlu_pro_physics", "phys-0", "Convert 3.5 km to m.\nA) 350\nB) 3500\nC) 35000\nD) 35"),
    ("mmlu_pro_physics", "phys-1", ACCELERATION),
    ("family", "fam-0", FAMILY),
]

# corpus id -> (prompt, expected kind or None when the row must be kept)
PLANTED = {
    "copy-exact": ("What is 23 + 45? Give only the final integer.", "exact"),
    "copy-case-space-punct": (WORD_PROBLEM.upper().replace(". ", ".   ").replace(",", ""), "exact"),
    "copy-letter-count": ('how many times does the letter R appear in the text -- the strawberry farmer carried ripe '
                          'berries', "exact"),
    "copy-syllogism": ("Consider these statements: 1. All whales are mammals 2. Some mammals are pets. "
                       "Does it logically follow that: Some whales are pets? (Answer Yes or No)", "exact"),
    "copy-mc-reordered": ("convert 3.5 KM to m\n(A) 35000\n(B) 35\n(C) 3500\n(D) 350", "exact"),
    "copy-extra-word": (WORD_PROBLEM.replace("buys 3 bags", "quickly buys 3 bags"), "near"),
    "copy-wrapped": (f"Question: {ACCELERATION}\nLet's think step by step.", "contained"),
    "copy-renamed": (WORD_PROBLEM.replace("Maria", "Sofia"), "near"),  # the same problem about someone else
    "sibling-quoted-text": ('How many times does the letter "r" appear in the text: "the strawberry farmer carried '
                            'sweet berries"?', None),
    "sibling-name-merged": (FAMILY.replace("George", "Theodore").replace("Sophia to", "Theodore to"), None),
    "sibling-arith": ("What is 23 + 46? Give only the final integer.", None),
    "sibling-operator": ("What is 23 - 45? Give only the final integer.", None),
    "sibling-word-problem": (WORD_PROBLEM.replace("loses 8", "loses 9"), None),
    "sibling-mc-stem": (ACCELERATION.replace("after 5 s", "after 4 s"), None),
    "sibling-letter-count": ('How many times does the letter "e" appear in the text: "the strawberry farmer carried '
                             'ripe berries"?', None),
    "other-convert": ("Convert 3.5 m to cm.\nA) 35\nB) 350\nC) 3500\nD) 0.35", None),
    "other-arith": ("Calculate 812 - 97 * 3. Give only the final integer.", None),
}


def _shingle_jaccard(a: str, b: str) -> float:
    """Word 3-gram Jaccard, written out here to show that the siblings would pass a similarity-only test."""
    def grams(text):
        words = normalize_text(text).split()
        return set(zip(words, words[1:], words[2:]))
    return len(grams(a) & grams(b)) / len(grams(a) | grams(b))


@pytest.fixture
def benchmarks():
    return pd.DataFrame(
        [{"benchmark": b, "id": i, "prompt": p, "answer": "x", "domain": "math"} for b, i, p in BENCHMARK_ITEMS]
    )


@pytest.fixture
def corpus():
    filler = [(f"fill-{k}", f"What is {100 + k} * {7 + k}? Give only the final integer.") for k in range(20)]
    rows = filler[:10] + [(cid, prompt) for cid, (prompt, _) in PLANTED.items()] + filler[10:]
    return pd.DataFrame(
        [{"id": cid, "domain": "math", "source": "test", "prompt": p, "answer": "0", "answer_format": "int"}
         for cid, p in rows]
    )


def test_normalize_equates_trivial_edits_and_keeps_what_changes_the_problem():
    assert normalize_text("Convert 3.5 km to m.\nA) 350\nB) 3500") == normalize_text("convert 3.5  KM to m\n(A) 3500\nb: 350")
    assert normalize_text("What is 5 + 3?") != normalize_text("What is 5 - 3?")
    assert normalize_text("Convert 3.5 km") != normalize_text("Convert 35 km")
    assert normalize_text("a well-known result -- see below") == normalize_text("A well known result; see below.")
    assert normalize_text("x = 7 - 3") != normalize_text("x = 7 3")
    assert normalize_text("Ｗｈａｔ is 1,000 ÷ 4?") == normalize_text("what is 1000 ÷ 4")
    assert normalize_text("x^2\t-\t5x  -\n6") == normalize_text("x^2 - 5x - 6") != normalize_text("x^2 5x 6")


def test_markup_around_an_item_is_removed_and_operators_stay():
    """Formatting markup reads as what it renders: emphasis, HTML tags and LaTeX text styles vanish (a block tag ends a
    line, so options in <p> tags are still options); a "*" between operands, beside a LaTeX brace or as a list marker,
    "<" and ">" as comparisons, "$" before an amount and "_" in an identifier keep their meaning."""
    item = normalize_text("What is 23 + 45?")
    for wrapped in ["**What is 23 + 45?**", "*What is 23 + 45?*", "***What is 23 + 45?***", "__What is 23 + 45?__",
                    "<p><b>What is 23 + 45?</b></p>", '<div class="q">What is <em>23 + 45</em>?</div>',
                    "\\textbf{What is 23 + 45?}", "\\emph{What} is 23 + 45?", "# What is 23 + 45?", "1. What is 23 + 45?"]:
        assert normalize_text(wrapped).removeprefix("1 ") == item, wrapped
    assert normalize_text("H<sub>2</sub>O<br>") == "h2o"
    assert normalize_text("<p>Find x.</p><p>B) 2</p><p>A) 1</p>") == normalize_text("Find x.\nA) 1\nB) 2")
    assert normalize_text("Compute 2*3*4 and 2**3.") == "compute 2 * 3 * 4 and 2 * * 3"
    assert normalize_text("(a+b)*(c+d)*2") == "a + b * c + d * 2"
    assert normalize_text("$\\log^{*}(n)$ and *n*") == "log ^ * n and n"
    assert normalize_text("\\begin{align*} x &= 1 \\end{align*}") == "begin align * x = 1 end align *"
    assert normalize_text("* Is a<b and c>d? *Yes*") == "* is a < b and c > d yes"
    assert normalize_text("Pay $5 and $7 for x_1.") == "pay 5 and 7 for x 1"


def test_copies_in_markup_removed_and_siblings_in_markup_kept(benchmarks):
    """Before markup was removed, "**" and "<p>" read as operators beside the item, so every copy counted as a
    sibling."""
    prompts = {"bold": f"**{WORD_PROBLEM}**", "html": f"<p><strong>{FAMILY}</strong></p>",
               "bold-label": "**Question:** What is 23 + 45? Give only the final integer.",
               "sibling-bold": "**What is 23 + 46? Give only the final integer.**",
               "sibling-html": f"<p>{WORD_PROBLEM.replace('loses 8', 'loses 9')}</p>"}
    corpus = pd.DataFrame([{"id": cid, "domain": "math", "source": "test", "prompt": p, "answer": "0",
                            "answer_format": "int"} for cid, p in prompts.items()])
    kept, audit = decontaminate(corpus, benchmarks)
    assert kept["id"].tolist() == ["sibling-bold", "sibling-html"]
    assert {e["corpus_id"]: (e["benchmark_id"], e["kind"]) for e in audit["examples"]} == {
        "bold": ("gsm8k-0", "exact"), "html": ("fam-0", "exact"), "bold-label": ("arith-0", "contained")}


def test_siblings_would_pass_similarity_alone():
    """The number test, not the Jaccard test, is what keeps the long siblings."""
    prompts = {cid: p for cid, (p, _) in PLANTED.items()}
    assert _shingle_jaccard(WORD_PROBLEM, prompts["sibling-word-problem"]) >= 0.8
    assert _shingle_jaccard(ACCELERATION, prompts["sibling-mc-stem"]) >= 0.8


def test_planted_copies_removed_and_siblings_kept(corpus, benchmarks):
    kept, audit = decontaminate(corpus, benchmarks)
    flagged = {cid for cid, (_, kind) in PLANTED.items() if kind}
    assert set(corpus["id"]) - set(kept["id"]) == flagged
    assert list(kept.columns) == list(corpus.columns)
    assert kept["id"].tolist() == [cid for cid in corpus["id"] if cid not in flagged]  # original order

    kinds = {e["corpus_id"]: e["kind"] for e in audit["examples"]}
    assert kinds == {cid: kind for cid, (_, kind) in PLANTED.items() if kind}
    near = next(e for e in audit["examples"] if e["kind"] == "near")
    assert near["benchmark_id"] == "gsm8k-0" and 0.8 <= near["jaccard"] < 1.0


def test_audit_counts_match_planted(corpus, benchmarks):
    kept, audit = decontaminate(corpus, benchmarks)
    assert audit["counts"] == {"corpus_rows": 37, "exact_hits": 5, "contained_hits": 1, "near_hits": 2, "removed": 8,
                               "kept": 29}
    assert audit["per_benchmark"] == {"gsm8k": 3, "arithmetic": 1, "letter_counting": 1, "syllogism": 1,
                                      "mmlu_pro_physics": 2, "family": 0}
    assert audit["per_source"] == {"test": {"rows": 37, "removed": 8}}
    mc = next(e for e in audit["examples"] if e["corpus_id"] == "copy-mc-reordered")
    assert (mc["benchmark"], mc["benchmark_id"], mc["jaccard"]) == ("mmlu_pro_physics", "phys-0", 1.0)
    json.dumps(audit)


def test_deterministic(corpus, benchmarks):
    first, second = decontaminate(corpus, benchmarks), decontaminate(corpus, benchmarks)
    pd.testing.assert_frame_equal(first[0], second[0])
    assert first[1] == second[1]


def test_empty_benchmark_set_keeps_everything(corpus, benchmarks):
    kept, audit = decontaminate(corpus, benchmarks.iloc[0:0])
    pd.testing.assert_frame_equal(kept, corpus)
    assert audit["counts"]["removed"] == 0 and audit["per_benchmark"] == {} and audit["examples"] == []


def test_files_round_trip(tmp_path, corpus, benchmarks):
    corpus.to_parquet(tmp_path / "corpus.parquet")
    benchmarks.to_parquet(tmp_path / "bench.parquet")
    audit = decontaminate_files(tmp_path / "corpus.parquet", [tmp_path / "bench.parquet"],
                                tmp_path / "out" / "clean.parquet", tmp_path / "out" / "audit.json")
    assert len(pd.read_parquet(tmp_path / "out" / "clean.parquet")) == audit["counts"]["kept"] == 29
    assert json.loads((tmp_path / "out" / "audit.json").read_text())["counts"] == audit["counts"]


def test_real_benchmarks_decontaminate_the_corpus_like_the_stand_ins():
    """Items loaded from the real benchmarks' native files: a corpus row copying one (with trivial edits) is removed
    and counted under that benchmark; the procedural rows stay."""
    import warnings
    from pathlib import Path

    from dataflex_rl.corpus.build import benchmark_items, build_corpus

    fixtures = Path(__file__).parent / "fixtures/benchmarks"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixtures are smaller than the real benchmarks
        real = pd.concat([benchmark_items("GSM8K", 0, 0, path=fixtures / "gsm8k_test.jsonl"),
                          benchmark_items("MMLU-Pro-physics", 0, 0, path=fixtures / "mmlu_pro_physics.jsonl")],
                         ignore_index=True)
    procedural, _ = build_corpus(["basic_arithmetic", "syllogism", "kinematics"], 30, seed=1)
    gsm8k, physics = (real[real["benchmark"] == name].iloc[0] for name in ("GSM8K", "MMLU-Pro-physics"))
    copies = pd.DataFrame([
        {**procedural.iloc[0].to_dict(), "id": "copy-gsm8k", "prompt": "  " + gsm8k["prompt"].upper() + " "},
        {**procedural.iloc[0].to_dict(), "id": "copy-physics", "prompt": physics["prompt"].replace(".", " .")},
    ])
    kept, audit = decontaminate(pd.concat([procedural, copies], ignore_index=True), real)
    assert audit["per_benchmark"] == {"GSM8K": 1, "MMLU-Pro-physics": 1}
    assert audit["counts"]["removed"] == 2 and kept["id"].tolist() == procedural["id"].tolist()


def test_a_validation_prompt_is_held_to_the_decontamination_test():
    """A prompt selection's validation rows are refused when they are or hold a test item as decontamination finds it
    (prompt_selection.validation_file.overlaps_with_tests, the dry run's check): the item inside a template, as well as
    the same id; a template sibling with other numbers is not one. The same rows as a corpus lose exactly that row."""
    from dataflex_rl.prompt_selection.validation_file import overlaps_with_tests

    gcd = "Find the Greatest Common Divisor (GCD) of these numbers: {}. Give only the GCD as your final answer."
    tests = pd.DataFrame({"benchmark": "gcd", "id": ["g-0", "g-1"], "prompt": [gcd.format("15, 6"),
                                                                               gcd.format("28, 21")]})
    validation = pd.DataFrame({"id": ["v-wrapped", "v-sibling", "g-1", "v-other"], "prompt": [
        "Solve the following problem step by step.\n\n" + gcd.format("15, 6").upper() + "\n\nPut it in \\boxed{}.",
        gcd.format("16, 6"), "What is 3 + 4?", "What is 2 + 2?"]})
    assert overlaps_with_tests(validation, tests, 0.8) == [("v-wrapped", "gcd", "g-0", "contained"),
                                                            ("g-1", "gcd", "g-1", "id")]
    as_corpus = validation.assign(source="file", answer="3")
    kept, _ = decontaminate(as_corpus, tests, threshold=0.8)
    assert set(as_corpus["id"]) - set(kept["id"]) == {"v-wrapped"}
