"""Verifiers: one per answer format, each reporting whether it parsed an answer at all, separately from correctness.

Formats: `procedural` (reasoning-gym's own scorer; reward 1 only at full credit, since `score_answer` gives partial
credit to near-misses such as " 2" or "2.0"), `multiple_choice` (an option, by letter or by its text), `math`
(math-verify equivalence of the final answer, with an exact-text fallback for answers math-verify cannot read),
`exact` (BBH targets: "(A)" also as "A" or the option's text; other targets by normalised text) and
`knights_knaves` (the set of knight/knave assignments). The extraction rules are in dataflex_rl.verify.extract.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping

from dataflex_rl.verify.extract import (answer_candidates, extract_choice, final_answer_text,
                                        knights_knaves_assignments, plain, stated_assignments)

FULL_CREDIT = 1.0


@dataclass(frozen=True)
class Verdict:
    parsed: bool
    correct: bool


def item_metadata(item: Mapping) -> dict:
    """An item's metadata as a dict (stored as JSON text in the parquet files; absent in hand-made items)."""
    metadata = item.get("metadata")
    if isinstance(metadata, str):
        return json.loads(metadata) if metadata else {}
    return dict(metadata or {})


@lru_cache(maxsize=None)
def _reasoning_gym_scorer(dataset: str) -> Callable:
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(dataset)


def verify_procedural(response: str, item: Mapping) -> Verdict:
    answer = final_answer_text(response)
    if not answer:
        return Verdict(parsed=False, correct=False)
    metadata = item_metadata(item)
    entry = {"question": item["prompt"], "answer": item["answer"], "metadata": metadata}
    score = _reasoning_gym_scorer(metadata["source_dataset"])(answer, entry)
    return Verdict(parsed=True, correct=score is not None and float(score) >= FULL_CREDIT)


def _options(item: Mapping) -> list[str] | None:
    metadata = item_metadata(item)
    options = metadata.get("options", metadata.get("choices"))
    return [str(o) for o in options] if options else None


def verify_multiple_choice(response: str, item: Mapping) -> Verdict:
    letter = extract_choice(response, _options(item))
    return Verdict(parsed=letter is not None, correct=letter == str(item["answer"]).strip().upper())


def math_values(text: str) -> list:
    """math-verify's reading of `text` as mathematics (its raw-text fallback left out); [] if it finds none."""
    from math_verify import parse

    delimited = any(mark in text for mark in ("$", "\\(", "\\[", "\\boxed"))
    return [value for value in parse(text if delimited else f"${text}$") if not isinstance(value, str)]


def math_answer(response: str) -> str | None:
    """The final answer of a math response: the last \\boxed{}, else the last 'the answer is ...', else the response
    itself when it is one line that math-verify reads as mathematics ('0.5', '\\frac12'); None otherwise."""
    for text, how in answer_candidates(response):
        if how != "bare" or math_values(text):
            return text
    return None


def verify_math(response: str, item: Mapping) -> Verdict:
    from math_verify import verify

    answer = math_answer(response)
    if answer is None:
        return Verdict(parsed=False, correct=False)
    gold = str(item["answer"])
    gold_values, predicted = math_values(gold), math_values(answer)
    equivalent = bool(gold_values and predicted and verify(gold_values, predicted))
    return Verdict(parsed=True, correct=equivalent or plain(answer) == plain(gold))


def _normalise_target(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip(".").strip()).casefold()


_LETTER_TARGET = re.compile(r"\(([A-J])\)")


def verify_exact(response: str, item: Mapping) -> Verdict:
    """A lettered target "(A)" matches "(A)", "A" or option A's text; any other target its normalised text."""
    gold = str(item["answer"]).strip()
    letter_target = _LETTER_TARGET.fullmatch(gold)
    if letter_target:
        letter = extract_choice(response, _options(item))
        return Verdict(parsed=letter is not None, correct=letter == letter_target.group(1))
    candidates = [text for text, _ in answer_candidates(response)]
    answer = next(iter(candidates), None) or final_answer_text(response)
    return Verdict(parsed=bool(answer), correct=bool(answer) and _normalise_target(answer) == _normalise_target(gold))


def verify_knights_knaves(response: str, item: Mapping) -> Verdict:
    """Correct iff every person's stated role (the last one after the response's conclusion) is the gold role."""
    names = item_metadata(item).get("names") or list(knights_knaves_assignments(str(item["answer"])))
    gold = knights_knaves_assignments(str(item["answer"]), names)
    predicted = stated_assignments(response, names)
    return Verdict(parsed=bool(predicted), correct=bool(predicted) and predicted == gold)


VERIFIERS: dict[str, Callable[[str, Mapping], Verdict]] = {
    "procedural": verify_procedural,
    "multiple_choice": verify_multiple_choice,
    "math": verify_math,
    "exact": verify_exact,
    "knights_knaves": verify_knights_knaves,
}


def get_verifier(answer_format: str) -> Callable[[str, Mapping], Verdict]:
    try:
        return VERIFIERS[answer_format]
    except KeyError:
        raise ValueError(f"no verifier for answer format {answer_format!r}; known: {', '.join(VERIFIERS)}") from None


def reward(response: str, item: Mapping) -> float:
    """Binary verifiable reward: 1.0 iff the item's verifier says correct."""
    return 1.0 if get_verifier(item["answer_format"])(response, item).correct else 0.0
