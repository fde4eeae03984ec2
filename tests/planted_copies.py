"""Planted copies of benchmark items, as contamination appears in real training sets, and the prompts that must stay.

Each edit kind turns an item into a training prompt that still holds it: wrapped in an instruction template, prefixed
"Question:", followed by an answer-format or a chain-of-thought instruction, re-cased, re-spaced, punctuation spaced
out, one word dropped, one word changed, or wrapped in formatting markup as chat-formatted corpora are (markdown
emphasis, headings and list markers, HTML tags, LaTeX text styles). A dropped or changed word is a word of letters
outside quotes: a changed number or quoted text makes a different problem (a template sibling), which must stay in the
corpus, in markup or not.
"""
from __future__ import annotations

import random
import re
import warnings
from pathlib import Path

import pandas as pd

from dataflex_rl.item_sources.registry import get_source
from dataflex_rl.item_sources.sources import generate_items
from dataflex_rl.corpus.decontam import normalize_text
from dataflex_rl.corpus.build import benchmark_items

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
SHARED = Path(__file__).parents[2] / "shared/data/real-benchmarks"
FIXTURE_FILES = {
    "MATH-500": "math500.jsonl", "AIME-2024": "aime2024.jsonl", "OlympiadBench": "olympiadbench.jsonl",
    "Minerva-Math": "minerva_math.jsonl", "GSM8K": "gsm8k_test.jsonl", "Knights&Knaves": "knights_knaves_hard.jsonl",
    "BBH-logical-deduction": "bbh_logical_deduction.jsonl",
    "BBH-tracking-shuffled-objects": "bbh_tracking_shuffled_objects.jsonl", "ZebraLogic": "zebralogic_mc.jsonl",
    "MMLU-Pro-chemistry": "mmlu_pro_chemistry.jsonl", "MMLU-Pro-physics": "mmlu_pro_physics.jsonl",
    "GPQA-Diamond": "gpqa_diamond.jsonl",
}
# The shared public copies the loaders read as they are (JSONL in the hub's schema).
SHARED_FILES = {
    "MATH-500": "math-500/budgetthinker_math500_test_ori.jsonl", "AIME-2024": "aime-2024/qwen25math_aime24_test.jsonl",
    "OlympiadBench": "olympiadbench/qwen25math_olympiadbench_test.jsonl",
    "GSM8K": "gsm8k/qwen25math_gsm8k_test.jsonl",
    "Knights&Knaves": "knights-knaves/mem-kk-logic_test_clean_people2_num10.jsonl",
}
# The procedural stand-ins whose siblings differ in their numbers.
NUMERIC_SOURCES = ["basic_arithmetic", "chain_sum", "products", "gcd", "simple_equations", "aiw", "unit_conversion",
                   "molar_mass", "kinematics"]
PROCEDURAL_SOURCES = NUMERIC_SOURCES + ["syllogism", "family_relationships", "letter_counting"]

TEMPLATES = [
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{item}\n\n### Response:",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{item}<|im_end|>\n"
    "<|im_start|>assistant\n",
    "Solve the following problem carefully. {item} Put your final answer within \\boxed{{}}.",
]
SUFFIXES = ["Answer with only the final result.", "Answer with the letter of the correct option.",
            "Answer with a single word or number, and nothing else."]
CHAIN_OF_THOUGHT = ["Let's think step by step.", "Think step by step, then give the final answer on its own line.",
                    "First explain your reasoning, then state the answer."]
# Formatting markup around an item, by kind: what a chat-formatted corpus wraps a question in.
MARKUP = {
    "markdown_emphasis": ["**{item}**", "*{item}*", "***{item}***", "_{item}_", "__{item}__", "**Question:** {item}",
                          "*Problem.* {item}"],
    "markdown_heading_list": ["# {item}", "## Problem 3\n\n{item}", "- {item}", "* {item}", "+ {item}", "1. {item}",
                              "### Exercise\n1. {item}"],
    "html": ["<p>{item}</p>", "<b>{item}</b>", "<strong>{item}</strong>", '<div class="question">{item}</div>',
             "<ol><li>{item}</li></ol>", "<p><em>Question:</em><br/>{item}</p>", "<h3>Problem</h3>\n<p>{item}</p>"],
    "latex": ["\\textbf{{{item}}}", "\\emph{{{item}}}", "\\textit{{{item}}}", "\\underline{{{item}}}",
              "\\textbf{{Problem.}} {item}"],
}
REPLACEMENTS = ["banana", "quietly", "purple", "seventh"]  # words no item below uses in the changed position
_WORD = re.compile(r"^[A-Za-z]{2,}$")
_SENTENCE_PUNCT = re.compile(r"([.,;:?!])(?=\s|$)")


def _editable(words: list[str]) -> list[int]:
    """Words of letters outside quotes: a quoted text is content, like a number (the text whose letters are counted)."""
    quotes = [0]
    for word in words:
        quotes.append(quotes[-1] + sum(word.count(q) for q in '"\u201c\u201d'))
    return [k for k, word in enumerate(words) if _WORD.match(word) and quotes[k] % 2 == 0]


def _respaced(item: str, rng: random.Random) -> str:
    return "".join(rng.choice(["  ", " \n", "\t", "   "]) if ch == " " else ch for ch in item)


def _word_dropped(item: str, rng: random.Random) -> str | None:
    words = item.split(" ")
    editable = _editable(words)
    if not editable:
        return None
    del words[rng.choice(editable)]
    return " ".join(words)


def _word_changed(item: str, rng: random.Random) -> str | None:
    words = item.split(" ")
    editable = _editable(words)
    if not editable:
        return None
    k = rng.choice(editable)
    words[k] = next(w for w in rng.sample(REPLACEMENTS, len(REPLACEMENTS)) if w != words[k].lower())
    return " ".join(words)


EDITS = {
    "wrapped": lambda item, rng: rng.choice(TEMPLATES).format(item=item),
    "question_prefix": lambda item, rng: f"Question: {item}",
    "answer_with": lambda item, rng: f"{item}\n{rng.choice(SUFFIXES)}",
    "chain_of_thought": lambda item, rng: f"{item}\n\n{rng.choice(CHAIN_OF_THOUGHT)}",
    "recased": lambda item, rng: rng.choice([str.upper, str.lower, str.title, str.swapcase])(item),
    "respaced": _respaced,
    "punctuation_spaced": lambda item, rng: _SENTENCE_PUNCT.sub(r" \1", item),
    "word_dropped": _word_dropped,
    "word_changed": _word_changed,
    **{kind: (lambda item, rng, forms=forms: rng.choice(forms).format(item=item)) for kind, forms in MARKUP.items()},
}


def real_items() -> pd.DataFrame:
    """The real benchmarks' items: every fixture, and the shared public copies when they are present."""
    paths = [(name, FIXTURES / file) for name, file in FIXTURE_FILES.items()]
    paths += [(name, SHARED / file) for name, file in SHARED_FILES.items() if (SHARED / file).exists()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixtures are smaller than the real benchmarks
        frames = [benchmark_items(name, 0, 0, path=path) for name, path in paths]
    return pd.concat(frames, ignore_index=True).drop_duplicates("prompt", ignore_index=True)


def procedural_items(n_per_source: int, seed: int = 1000) -> pd.DataFrame:
    return pd.concat([benchmark_items(name, n_per_source, seed) for name in PROCEDURAL_SOURCES], ignore_index=True)


def planted(items: pd.DataFrame, kind: str, seed: int = 0) -> pd.DataFrame:
    """One copy of each item under the edit `kind` (an item the edit cannot apply to is skipped), as corpus rows whose
    `source` names the edit and whose `id` names the item copied."""
    rng, rows = random.Random(f"{kind}-{seed}"), []
    for item_id, prompt in zip(items["id"], items["prompt"]):
        copy = EDITS[kind](prompt, rng)
        if copy is not None and copy != prompt:
            rows.append({"id": f"{kind}-{item_id}", "domain": "math", "source": kind, "prompt": copy,
                         "answer": "0", "answer_format": "int"})
    return pd.DataFrame(rows)


def _numbers(prompt: str) -> tuple[str, ...]:
    """The number multiset of a prompt (of its normalised text, where "1,000" is 1000 and options are sorted)."""
    return tuple(sorted(re.findall(r"\d+(?:\.\d+)?", normalize_text(prompt))))


def siblings(items: pd.DataFrame, n_per_source: int, seed: int = 7) -> pd.DataFrame:
    """Training items of the numeric generators whose number multiset differs from every item's: the same templates,
    other problems. (Against every generator's items: chain_sum's "1 + 5 =" is basic_arithmetic's "Calculate 1 + 5.")"""
    taken = {_numbers(p) for p in items["prompt"]}
    frames = []
    for name in NUMERIC_SOURCES:
        drawn = pd.DataFrame(generate_items(get_source(name), n_per_source, seed, "sibling"))
        frames.append(drawn[[_numbers(p) not in taken for p in drawn["prompt"]]])
    return pd.concat(frames, ignore_index=True)
