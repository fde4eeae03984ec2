"""Prompt templates per benchmark family: the user message a model sees for a real benchmark's item.

Each template asks for the answer in the form its extractor reads first (dataflex_rl.verify.extract): a `\\boxed{}`
for math, "The answer is (X)" for lettered options, one "X is a knight/knave" sentence per person after a CONCLUSION
line for Knights&Knaves, and BBH's own target form "(X)". The chat template is applied on top of this text by
dataflex_rl.tasks.prompting, in training and evaluation alike.
"""
from __future__ import annotations

from typing import Sequence

LETTERS = "ABCDEFGHIJ"

_MATH = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
_MULTIPLE_CHOICE = ("{question}\n\n{options}\n\nAnswer with the letter of the correct option. Reason step by step, "
                    "then finish with \"The answer is (X)\", where X is that letter.")
_KNIGHTS_KNAVES = ("{question}\n\nReason step by step. Then write \"CONCLUSION:\" and, for every inhabitant, one "
                   "sentence of the form \"X is a knight\" or \"X is a knave\".")
_BBH = ("{question}\n\nReason step by step, then finish with \"So the answer is (X)\", where (X) is the option you "
        "choose.")

FAMILIES = {
    "math": _MATH,
    "multiple_choice": _MULTIPLE_CHOICE,
    "knights_knaves": _KNIGHTS_KNAVES,
    "bbh": _BBH,
}


def lettered_options(options: Sequence[str]) -> str:
    """'A) first\\nB) second ...', the listing the multiple-choice extractor's option-text matching mirrors."""
    if len(options) > len(LETTERS):
        raise ValueError(f"{len(options)} options; at most {len(LETTERS)} can be lettered A-J")
    return "\n".join(f"{letter}) {text}" for letter, text in zip(LETTERS, options))


def user_message(family: str, question: str, options: Sequence[str] | None = None) -> str:
    """The family's template filled with the item's question (and, for multiple choice, its lettered options)."""
    try:
        template = FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown prompt template family {family!r}; known: {', '.join(FAMILIES)}") from None
    if family == "multiple_choice":
        if not options:
            raise ValueError("a multiple-choice prompt needs the item's options (metadata 'options')")
        return template.format(question=question, options=lettered_options(options))
    return template.format(question=question)
