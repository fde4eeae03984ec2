"""The `math` answer format (MATH-500, AIME, OlympiadBench, Minerva, GSM8K): math-verify equivalence of the final
answer, with an exact-text fallback for answers math-verify cannot read.

Before math-verify reads a gold or a response, what it misreads is rewritten (`normalised`): currency signs, scientific
notation, a number ending in a bare point. A gold it reads degenerately (`_gold_reading`) is compared as text. An item
whose metadata lists several `answers` (OlympiadBench's multi-answer rows) is the set of them: a response must state
every one, in any order, and nothing else."""
from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import Mapping

from dataflex_rl.formats.base import AnswerFormat, Verdict
from dataflex_rl.formats.extract import answer_candidates, plain
from dataflex_rl.formats.forms import perturbed
from dataflex_rl.artefacts.items import item_metadata

TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."


_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
# 4.5e33, 1.5E-3: a number written in e-notation (not the e of a word or a command).
_E_NOTATION = re.compile(r"(?<![\w.\\])" + _NUMBER + r"[eE]([+-]?\d+)(?![\w.])")
# 1.13 \times 10^{2}, 2.5 \cdot 10^-3, 3\times10^8.
_TIMES_TEN = re.compile(r"(?<![\w.\\])" + _NUMBER
                        + r"\s*\\(?:times|cdot)\s*10\s*\^\s*(?:\{\s*([+-]?\d+)\s*\}|([+-]?\d))")
_BARE_POINT, _SPLIT_SPAN = re.compile(r"(\d)\.(?![\d.\\])"), re.compile(r"(?<=\S)\$\s*\$(?=\S)")
_TEXT_NUMBER = re.compile(r"\\(?:text|mathrm)\s*\{\s*(-?" + _NUMBER + r")\s*\}")


def normalised(text: str) -> str:
    """`text` with what math-verify misreads rewritten: a currency sign (`\\$18.90`) and a negative thin space
    (`32,\\!348`) dropped; scientific notation, in e-notation (`4.5e33`, which it reads as 4.5·e·33) or as
    `1.13 \\times 10^{2}` (which it evaluates in floating point, 112.99999999999999), written out as the exact decimal;
    a number ending in a bare point (`-1./3`, which it reads as -1) without it; a number in `\\text{}` (which it
    reads as text) unwrapped; and one expression split into two math spans (`a+$ $b`) joined."""
    text = _TEXT_NUMBER.sub(r"\1", text.replace("\\$", "").replace("\\!", ""))
    text = _SPLIT_SPAN.sub(" ", text)
    text = _E_NOTATION.sub(lambda m: _decimal(m.group(1), m.group(2)), text)
    text = _TIMES_TEN.sub(lambda m: _decimal(m.group(1), m.group(2) or m.group(3)), text)
    return _BARE_POINT.sub(r"\1", text)


def _decimal(mantissa: str, exponent: str) -> str:
    """mantissa × 10^exponent written out exactly ('4.5', '33' → '4500...0'; '1.5', '-3' → '0.0015')."""
    return format(Decimal(f"{mantissa}e{exponent}").normalize(), "f")


def math_values(text: str) -> list:
    """math-verify's reading of `text` (normalised) as mathematics (its raw-text fallback left out); [] if it finds
    none."""
    from math_verify import parse

    text = normalised(text)
    delimited = any(mark in text for mark in ("$", "\\(", "\\[", "\\boxed"))
    return [value for value in parse(text if delimited else f"${text}$") if not isinstance(value, str)]


def math_answer(response: str) -> str | None:
    """The final answer of a math response: the last \\boxed{}, else the last 'the answer is ...', else the response
    itself when it is one line that math-verify reads as mathematics ('0.5', '\\frac12'); None otherwise."""
    for text, how in answer_candidates(response):
        if how != "bare" or math_values(text):
            return text
    return None


@lru_cache(maxsize=4096)
def _gold_reading(gold: str) -> tuple:
    """math-verify's reading of a gold, () where it reads none or a degenerate one: a reading that cannot tell the
    gold from the gold plus one (`N=n`, read as the boolean True; an expression of which it keeps only a '2') is no
    reading, and the gold is compared as text."""
    from math_verify import verify

    values = math_values(gold)
    return tuple(values) if values and not verify(values, math_values(f"{gold}+1")) else ()


def _equivalent(answer: str, gold: str) -> bool:
    from math_verify import verify

    gold_values = list(_gold_reading(gold))
    predicted = math_values(answer) if gold_values else []
    if gold_values and predicted and verify(gold_values, predicted):
        return True
    return plain(normalised(answer)) == plain(normalised(gold))


_OPEN, _CLOSE = "([{", ")]}"
_SEPARATOR = re.compile(r",|\s+and\s+|;")


def answer_parts(text: str) -> list[str]:
    """`text` cut at its top-level commas, semicolons and 'and's (not those inside brackets or braces), math
    delimiters dropped: '$69$, $84$' → ['69', '84']; '(1, 2) and 3' → ['(1, 2)', '3']."""
    text = text.replace("$", "").replace("\\(", "").replace("\\)", "")
    parts, depth, start, index = [], 0, 0, 0
    while index < len(text):
        char = text[index]
        depth += (char in _OPEN) - (char in _CLOSE)
        separator = _SEPARATOR.match(text, index) if depth == 0 else None
        if separator:
            parts.append(text[start:index])
            start = index = separator.end()
            continue
        index += 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _all_given(answer: str, golds: list[str]) -> bool:
    """Whether `answer` states each of `golds` once, in any order, and nothing else."""
    parts = answer_parts(answer)
    if len(parts) != len(golds):
        return False
    for gold in golds:
        match = next((part for part in parts if _equivalent(part, gold)), None)
        if match is None:
            return False
        parts.remove(match)
    return True


def item_answers(item: Mapping) -> list[str]:
    """The item's set of answers where its metadata lists several `answers` (each cut into its parts: one of
    OlympiadBench's may hold several tuples); [] for a single answer."""
    answers = [part for answer in item_metadata(item).get("answers") or [] for part in answer_parts(str(answer))]
    return answers if len(answers) > 1 else []


def verify_math(response: str, item: Mapping) -> Verdict:
    answer = math_answer(response)
    if answer is None:
        return Verdict(parsed=False, correct=False)
    answers = item_answers(item)
    return Verdict(parsed=True, correct=_all_given(answer, answers) if answers else
                   _equivalent(answer, str(item["answer"])))


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


def _stated_forms(answer: str) -> list[str]:
    """`answer` as models state a final answer: boxed, after 'The answer is', Minerva's 'Final Answer:' line, in
    display math."""
    return [
        f"\\boxed{{{answer}}}",
        f"The answer is ${answer}$.",
        f"Final Answer: The final answer is ${answer}$. I hope it is correct.",
        f"We simplify step by step.\nSo the result is\n$$\\boxed{{{answer}}}$$",
        f"**Final Answer**\n\\[\n\\boxed{{{answer}}}\n\\]",
    ]


def gold_forms(answer: str, item: Mapping) -> list[str]:
    """The stated forms; the bare `$answer$` where the verifier reads it as an answer (math_answer); a number's other
    spelling; several answers also in reverse order and joined by 'and'."""
    bare = f"${answer}$"
    forms = _stated_forms(answer) + ([bare] if math_answer(bare) else [])
    other = _decimal_form(answer)
    if other:
        forms += [other, f"The answer is {other}.", f"Final Answer: \\boxed{{{other}}}"]
    answers = item_answers(item)
    if answers:
        forms += [f"\\boxed{{{', '.join(reversed(answers))}}}",
                  "The answers are " + " and ".join(f"${a}$" for a in answers) + "."]
    return forms


def wrong_forms(answer: str, item: Mapping) -> list[str]:
    """A number moved by one (see forms.perturbed), any other expression with '+1' appended; for several answers,
    one of them left out."""
    wrong = perturbed(answer) if re.fullmatch(r"-?[\d.]+", answer) else f"{answer}+1"
    answers = item_answers(item)
    missing = [f"\\boxed{{{', '.join(answers[1:])}}}"] if answers else []
    return [wrong, f"\\boxed{{{wrong}}}", f"The answer is ${wrong}$."] + missing


_MATHEMATICS = re.compile(r"[\d\\^_=]")


def gold_problem(item: Mapping) -> str | None:
    """A math gold must hold mathematics: a value math-verify reads or, where it reads none (`t(0,4]`,
    `np.arcsin(10/13)`), digits or LaTeX the verifier compares as normalised text. Prose is refused."""
    answer = item["answer"]
    if math_values(answer) or _MATHEMATICS.search(answer):
        return None
    return f"math-verify finds no expression in {answer!r}"


FORMAT = AnswerFormat("math", verify_math, gold_forms, wrong_forms, gold_problem, template=TEMPLATE)
