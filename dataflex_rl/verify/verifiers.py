"""Verifiers: one per answer format, each reporting whether it parsed an answer at all, separately from correctness.

Formats: `procedural` (reasoning-gym's own scorer; reward 1 only at full credit, since `score_answer` gives partial
credit to near-misses such as " 2" or "2.0"), `multiple_choice` (a lettered option), `math` (math-verify equivalence),
`exact` (normalised string equality, BBH targets) and `knights_knaves` (the set of knight/knave assignments).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping

FULL_CREDIT = 1.0


@dataclass(frozen=True)
class Verdict:
    parsed: bool
    correct: bool


def final_answer_text(response: str) -> str:
    """The model's final answer: text after the last 'Answer:' marker (if any), first non-empty line, stripped."""
    tail = re.split(r"(?i)\banswer\s*:", response)[-1]
    for line in tail.splitlines():
        if line.strip():
            return line.strip()
    return ""


@lru_cache(maxsize=None)
def _reasoning_gym_scorer(dataset: str) -> Callable:
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(dataset)


def verify_procedural(response: str, item: Mapping) -> Verdict:
    answer = final_answer_text(response)
    if not answer:
        return Verdict(parsed=False, correct=False)
    metadata = json.loads(item["metadata"]) if isinstance(item["metadata"], str) else item["metadata"]
    entry = {"question": item["prompt"], "answer": item["answer"], "metadata": metadata}
    score = _reasoning_gym_scorer(metadata["source_dataset"])(answer, entry)
    return Verdict(parsed=True, correct=score is not None and float(score) >= FULL_CREDIT)


_STATED_CHOICE = re.compile(r"(?i)answer\s+is\s*:?\s*\(?([A-J])\)?(?![A-Za-z])")
_LEADING_CHOICE = re.compile(r"^\(?([A-J])\)?(?:[.):\s]|$)")


def extract_choice(response: str) -> str | None:
    """The chosen option letter, from 'B', '(B)', 'B) 3500', 'B.' or 'The answer is (B).'; None if there is none."""
    stated = _STATED_CHOICE.search(response)
    if stated:
        return stated.group(1).upper()
    leading = _LEADING_CHOICE.match(final_answer_text(response))
    return leading.group(1).upper() if leading else None


def verify_multiple_choice(response: str, item: Mapping) -> Verdict:
    letter = extract_choice(response)
    return Verdict(parsed=letter is not None, correct=letter == str(item["answer"]).strip().upper())


def verify_math(response: str, item: Mapping) -> Verdict:
    from math_verify import parse, verify

    predicted = parse(response)
    if not predicted:
        return Verdict(parsed=False, correct=False)
    gold = parse(f"${item['answer']}$")
    return Verdict(parsed=True, correct=bool(gold) and bool(verify(gold, predicted)))


def _normalise_target(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip(".").strip()).casefold()


def verify_exact(response: str, item: Mapping) -> Verdict:
    answer = final_answer_text(response)
    return Verdict(parsed=bool(answer), correct=bool(answer) and _normalise_target(answer) == _normalise_target(item["answer"]))


_ASSIGNMENT = re.compile(r"\b([A-Z][a-z]+)\s+is\s+an?\s+(knight|knave)\b", re.IGNORECASE)


def knights_knaves_assignments(text: str) -> dict[str, str]:
    """{'Zoey': 'knight', ...} from sentences such as 'Zoey is a knight, and Oliver is a knave'."""
    return {name.capitalize(): role.lower() for name, role in _ASSIGNMENT.findall(text)}


def verify_knights_knaves(response: str, item: Mapping) -> Verdict:
    predicted = knights_knaves_assignments(response)
    return Verdict(parsed=bool(predicted), correct=bool(predicted) and predicted == knights_knaves_assignments(item["answer"]))


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
