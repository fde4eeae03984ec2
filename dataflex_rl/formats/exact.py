"""The `exact` answer format (BBH targets): a lettered target "(A)" matches "(A)", "A" or option A's text, as a
multiple-choice answer does; any other target its normalised text."""
from __future__ import annotations

import re
from typing import Mapping

from dataflex_rl.artefacts.items import LETTERS
from dataflex_rl.formats.base import AnswerFormat, Verdict
from dataflex_rl.formats.extract import answer_candidates, final_answer_text
from dataflex_rl.formats.forms import answer_lines, perturbed
from dataflex_rl.formats.multiple_choice import choice_forms, extract_choice, item_options

# BBH's inputs list their own "(A) ..." options; the instruction asks for BBH's target form.
TEMPLATE = ("{question}\n\nReason step by step, then finish with \"So the answer is (X)\", where (X) is the option you "
            "choose.")
_LETTER_TARGET = re.compile(r"\(([A-J])\)")


def _normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().strip(".").strip()).casefold()


def exact_answer(response: str) -> str:
    """The response's final answer text: its first answer candidate (boxed, stated, bare), else the line after
    'Answer:'; '' if there is none."""
    return next((text for text, _ in answer_candidates(response)), None) or final_answer_text(response)


def verify_exact(response: str, item: Mapping) -> Verdict:
    gold = str(item["answer"]).strip()
    letter_target = _LETTER_TARGET.fullmatch(gold)
    if letter_target:
        letter = extract_choice(response, item_options(item))
        return Verdict(parsed=letter is not None, correct=letter == letter_target.group(1))
    answer = exact_answer(response)
    return Verdict(parsed=bool(answer), correct=bool(answer) and _normalised(answer) == _normalised(gold))


def gold_forms(answer: str, item: Mapping) -> list[str]:
    letter = _LETTER_TARGET.fullmatch(answer)
    if letter:
        return [answer, f"So the answer is {answer}."] + choice_forms(letter.group(1), item_options(item))
    return answer_lines(answer)


def wrong_forms(answer: str, item: Mapping) -> list[str]:
    letter = _LETTER_TARGET.fullmatch(answer)
    if letter:
        other = "B" if letter.group(1) == "A" else "A"
        return [f"({other})", other, f"So the answer is ({other})."]
    return answer_lines(perturbed(answer))


def gold_problem(item: Mapping) -> str | None:
    """A lettered target must name one of the item's listed options (no model answer could match it otherwise)."""
    answer = item["answer"]
    letter, options = _LETTER_TARGET.fullmatch(answer.strip()), item_options(item)
    if letter and options and letter.group(1) not in LETTERS[: len(options)]:
        return (f"target {answer.strip()!r} names option {letter.group(1)}, but the item's options are "
                f"{', '.join(LETTERS[: len(options)])}")
    return None if _normalised(answer) else f"{answer!r} is empty after normalisation"


FORMAT = AnswerFormat("exact", verify_exact, gold_forms, wrong_forms, gold_problem, template=TEMPLATE)
