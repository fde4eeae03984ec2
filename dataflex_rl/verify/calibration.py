"""Verifier calibration: before anything is trained, every benchmark's verifier must give 1 to its gold answers written
the ways models write them, 0 to wrong answers in every form it accepts, and report a response that states no answer
as a parse failure, not as a wrong answer. A failure stops the DAG.

The surface forms are those of the benchmark's registered answer format; the verifier is the one the items name. A
benchmark whose items name another format (a math benchmark scored by the multiple-choice extractor) therefore fails,
and the error says that the extractor read none of the gold answers and names the benchmark and both formats.
"""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Mapping

import pandas as pd

from dataflex_rl.tasks.registry import REGISTRY
from dataflex_rl.verify.extract import LETTERS, knights_knaves_assignments
from dataflex_rl.verify.verifiers import get_verifier, item_metadata

_SWAPS = {"yes": "No", "no": "Yes", "true": "False", "false": "True", "knight": "knave", "knave": "knight"}
# Responses that state no answer at all: each must come back parsed=False. The procedural format reads any non-empty
# line as the answer (reasoning-gym's scorers decide), so for it only the empty response is answer-less.
NO_ANSWER = ("", "I am not sure how to solve this.", "Let me think about it step by step.\nFirst, we list the facts.")


def no_answer_responses(answer_format: str) -> tuple[str, ...]:
    return NO_ANSWER[:1] if answer_format == "procedural" else NO_ANSWER


class CalibrationError(RuntimeError):
    """A verifier accepted a wrong answer, rejected a gold one, or claimed to parse a response without an answer."""


def _options(item: Mapping) -> list[str]:
    metadata = item_metadata(item)
    return [str(o) for o in metadata.get("options", metadata.get("choices")) or []]


def _names(item: Mapping) -> list[str]:
    return item_metadata(item).get("names") or list(knights_knaves_assignments(str(item["answer"])))


def _perturbed(answer: str) -> str:
    """A wrong answer of the same shape: a number moved by one, a yes/no flipped, otherwise the text altered."""
    text = answer.strip()
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + 1)
    if re.fullmatch(r"-?\d*\.\d+", text):
        return str(float(text) + 1)
    swapped = re.sub(r"(?i)\b(yes|no|true|false|knight|knave)\b", lambda m: _SWAPS[m.group(1).lower()], text, count=1)
    if swapped != text:
        return swapped
    return text[::-1] if text[::-1].casefold() != text.casefold() else text + "x"


_FRACTION = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")


def _decimal_form(answer: str) -> str | None:
    """A number's other spelling: '\\frac{1}{2}' → '0.5', '0.5' → '1/2', '3' → '3.0'; None for anything else."""
    fraction = _FRACTION.fullmatch(answer.strip())
    if fraction:
        value = Fraction(int(fraction.group(2)), int(fraction.group(3))) * (-1 if fraction.group(1) else 1)
        decimal = float(value)
        return repr(decimal) if Fraction(decimal) == value else f"{value.numerator}/{value.denominator}"
    if re.fullmatch(r"-?\d+", answer.strip()):
        return f"{int(answer)}.0"
    if re.fullmatch(r"-?\d*\.\d+", answer.strip()):
        value = Fraction(answer.strip())
        return f"{value.numerator}/{value.denominator}"
    return None


def _math_forms(answer: str) -> list[str]:
    forms = [
        f"\\boxed{{{answer}}}",
        f"The answer is ${answer}$.",
        f"Final Answer: The final answer is ${answer}$. I hope it is correct.",
        f"We simplify step by step.\nSo the result is\n$$\\boxed{{{answer}}}$$",
        f"**Final Answer**\n\\[\n\\boxed{{{answer}}}\n\\]",
        f"${answer}$",
    ]
    other = _decimal_form(answer)
    if other:
        forms += [other, f"The answer is {other}.", f"Final Answer: \\boxed{{{other}}}"]
    return forms


def _choice_forms(letter: str, options: list[str]) -> list[str]:
    forms = [letter, f"({letter})", f"{letter}.", f"The answer is ({letter}).", f"Answer: {letter}",
             f"Comparing the options, the answer is {letter} because it fits every clue.", f"\\boxed{{{letter}}}"]
    if letter in LETTERS[: len(options)]:
        text = options[LETTERS.index(letter)]
        forms += [f"{letter}) {text}", text, f"The answer is {text}."]
    return forms


def _kk_forms(assignments: dict[str, str]) -> list[str]:
    sentences = [f"{name} is a {role}" for name, role in assignments.items()]
    numbered = "\n".join(f"({i}) {s}" for i, s in enumerate(sentences, start=1))
    reversed_ = " and ".join(reversed(sentences))
    first, role = next(iter(assignments.items()))
    wrong_guess = f"Suppose {first} is a {_SWAPS[role]}; that leads to a contradiction."
    return [
        ", ".join(sentences) + ".",
        f"CONCLUSION:\n{numbered}",
        f"{reversed_}.",
        f"{wrong_guess}\nCONCLUSION: {'. '.join(sentences)}.",
        "; ".join(f"{name}: {role}" for name, role in assignments.items()),
    ]


def gold_responses(item: Mapping, answer_format: str | None = None) -> list[str]:
    """The gold answer in the surface forms a model produces for `answer_format` (default: the item's own)."""
    answer, fmt = str(item["answer"]).strip(), answer_format or item["answer_format"]
    if fmt == "multiple_choice":
        return _choice_forms(answer, _options(item))
    if fmt == "math":
        return _math_forms(answer)
    if fmt == "knights_knaves":
        return _kk_forms(knights_knaves_assignments(answer, _names(item)))
    letter = re.fullmatch(r"\(([A-J])\)", answer)
    if fmt == "exact" and letter:
        return [answer, f"So the answer is {answer}."] + _choice_forms(letter.group(1), _options(item))
    return [answer, f"Answer: {answer}"]


def corrupted_responses(item: Mapping, answer_format: str | None = None) -> list[str]:
    """Wrong answers in every form the format accepts."""
    answer, fmt = str(item["answer"]).strip(), answer_format or item["answer_format"]
    if fmt == "multiple_choice":
        options = _options(item)
        wrong = [letter for letter in LETTERS[: max(len(options), 4)] if letter != answer]
        texts = [options[LETTERS.index(w)] for w in wrong[:1] if options]
        return wrong + [f"The answer is ({letter})." for letter in wrong[:1]] + texts
    if fmt == "knights_knaves":
        assignments = knights_knaves_assignments(answer, _names(item))
        first = next(iter(assignments))
        flipped = {**assignments, first: _SWAPS[assignments[first]]}
        return [", ".join(f"{n} is a {r}" for n, r in flipped.items()) + ".",
                "CONCLUSION:\n" + "\n".join(f"{n} is a {r}" for n, r in flipped.items())]
    letter = re.fullmatch(r"\(([A-J])\)", answer)
    if fmt == "exact" and letter:
        other = "B" if letter.group(1) == "A" else "A"
        return [f"({other})", other, f"So the answer is ({other})."]
    wrong = f"{answer}+1" if fmt == "math" and not re.fullmatch(r"-?[\d.]+", answer) else _perturbed(answer)
    if fmt == "math":
        return [wrong, f"\\boxed{{{wrong}}}", f"The answer is ${wrong}$."]
    return [wrong, f"Answer: {wrong}"]


def calibrate_benchmark(name: str, items: pd.DataFrame, max_items: int | None = None) -> dict:
    """Run the benchmark's verifier on gold, corrupted and answer-less responses; raise CalibrationError naming the
    benchmark and the formats on any wrong verdict."""
    if items.empty:
        raise CalibrationError(f"benchmark {name!r}: no items to calibrate on")
    rows = items.head(max_items) if max_items else items
    formats = sorted(rows["answer_format"].unique())
    registered = REGISTRY[name].answer_format if name in REGISTRY else None
    failures: list[str] = []
    gold_checked = gold_parsed = corrupt_checked = unparsed_checked = 0
    for item in rows.to_dict("records"):
        verifier = get_verifier(item["answer_format"])
        surface = registered or item["answer_format"]
        for response in gold_responses(item, surface):
            gold_checked += 1
            verdict = verifier(response, item)
            gold_parsed += verdict.parsed
            if not (verdict.parsed and verdict.correct):
                failures.append(f"gold {response!r} for item {item['id']} scored 0 (parsed={verdict.parsed})")
        for response in corrupted_responses(item, surface):
            corrupt_checked += 1
            if verifier(response, item).correct:
                failures.append(f"wrong answer {response!r} for item {item['id']} (gold {item['answer']!r}) scored 1")
        for response in no_answer_responses(item["answer_format"]):
            unparsed_checked += 1
            if verifier(response, item).parsed:
                failures.append(f"the answer-less response {response!r} for item {item['id']} was reported as "
                                "parsed (a parse failure must be reported as one)")
    report = {
        "benchmark": name,
        "answer_formats": formats,
        "registered_format": registered,
        "items": len(rows),
        "gold_checked": gold_checked,
        "gold_parsed": gold_parsed,
        "corrupted_checked": corrupt_checked,
        "no_answer_checked": unparsed_checked,
        "failures": len(failures),
        "examples": failures[:10],
    }
    if failures:
        scored_as = ", ".join(formats)
        mismatch = ""
        if gold_parsed == 0:
            written = f"written as {registered} answers " if registered else ""
            mismatch = (f"the {scored_as} extractor parsed none of the {gold_checked} gold answers {written}— is "
                        f"answer_format {scored_as} right for this benchmark?; ")
        raise CalibrationError(
            f"verifier calibration failed for benchmark {name!r} (format {scored_as}): {mismatch}{len(failures)} of "
            f"{gold_checked + corrupt_checked + unparsed_checked} checks wrong, e.g. {failures[0]}"
        )
    return report
