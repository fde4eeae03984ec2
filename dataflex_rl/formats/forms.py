"""Surface forms shared by the formats' calibration: a bare answer and its 'Answer:' line, and a wrong answer of the
same shape."""
from __future__ import annotations

import re

SWAPS = {"yes": "No", "no": "Yes", "true": "False", "false": "True", "knight": "knave", "knave": "knight"}


def answer_lines(answer: str) -> list[str]:
    """`answer` bare and after 'Answer:', the two forms every format reads."""
    return [answer, f"Answer: {answer}"]


def perturbed(answer: str) -> str:
    """A wrong answer of the same shape: a number moved by one, a yes/no flipped, otherwise the text altered."""
    text = answer.strip()
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + 1)
    if re.fullmatch(r"-?\d*\.\d+", text):
        return str(float(text) + 1)
    swapped = re.sub(r"(?i)\b(yes|no|true|false|knight|knave)\b", lambda m: SWAPS[m.group(1).lower()], text, count=1)
    if swapped != text:
        return swapped
    return text[::-1] if text[::-1].casefold() != text.casefold() else text + "x"
