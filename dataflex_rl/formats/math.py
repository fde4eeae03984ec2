"""The `math` answer format (MATH-500, AIME, OlympiadBench, Minerva, GSM8K): math-verify equivalence of the final
answer, with an exact-text fallback for answers math-verify cannot read."""
from __future__ import annotations

import re
from fractions import Fraction
from typing import Mapping

from dataflex_rl.formats.base import AnswerFormat, Verdict
from dataflex_rl.formats.extract import answer_candidates, plain
from dataflex_rl.formats.forms import perturbed

TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."


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


def gold_forms(answer: str, item: Mapping) -> list[str]:
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


def wrong_forms(answer: str, item: Mapping) -> list[str]:
    """A number moved by one (see forms.perturbed), any other expression with '+1' appended."""
    wrong = perturbed(answer) if re.fullmatch(r"-?[\d.]+", answer) else f"{answer}+1"
    return [wrong, f"\\boxed{{{wrong}}}", f"The answer is ${wrong}$."]


def gold_problem(item: Mapping) -> str | None:
    """A math gold must hold a value that math-verify reads as mathematics (not only its raw-text fallback), or the
    verifier can only compare strings."""
    answer = item["answer"]
    return None if math_values(answer) else f"math-verify finds no expression in {answer!r}"


FORMAT = AnswerFormat("math", verify_math, gold_forms, wrong_forms, gold_problem, template=TEMPLATE)
