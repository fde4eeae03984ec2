"""Answer extraction shared by the formats: where a response states its final answer, whatever the format.

Every extractor returns None (or '') when the response states no answer it can read, so that a verifier can report a
parse failure separately from a wrong answer (an evaluator that scores what it cannot read as plain zero hides a
broken format as a bad model). Where a response states its answer several times, the last statement wins. What each
format reads in that text (a letter, a value, assignments) is in its own module.
"""
from __future__ import annotations

import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "The answer is", "Final Answer:", "**Final Answer**: ...", "the final answer is" (Minerva's form), "the answers are".
_STATED = re.compile(r"(?i)\b(?:final\s+answer|the\s+answers?|answer)\b[*\s]*(?:is\b|are\b|:)[*\s:]*")
ANSWER_MARKER = re.compile(r"(?i)\banswer\s*:")
_MATH_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")


def last_boxed(response: str) -> str | None:
    """The content of the last `\\boxed{...}` (or `\\fbox{...}`), braces balanced; None if there is none."""
    starts = [m.end() for m in _BOXED.finditer(response)]
    for start in reversed(starts):
        depth, index = 1, start
        while index < len(response) and depth:
            depth += {"{": 1, "}": -1}.get(response[index], 0)
            index += 1
        if depth == 0:
            return response[start : index - 1].strip()
    return None


_NEXT_SPAN = re.compile(r"\s*(?:\$|\\\(|,|and\s+\$)")


def _closing(tail: str, right: str, start: int) -> int:
    """Where the delimiter `right` closes a span opened before `start` (an escaped `\\$`, a currency sign, does
    not); -1 if it does not."""
    match = re.compile(r"(?<!\\)" + re.escape(right)).search(tail, start)
    return match.start() if match else -1


def _cut_statement(tail: str) -> str:
    """The answer at the start of `tail`: a delimited math span, else the rest of the line up to the sentence's end
    (also where the span is followed by another span, a comma or 'and': '$-1.5$$\\text{kJ}$', '$69$ and $84$')."""
    tail = tail.lstrip()
    for left, right in _MATH_DELIMITERS:
        if tail.startswith(left):
            end = _closing(tail, right, len(left))
            if end > 0 and not _NEXT_SPAN.match(tail, end + len(right)):
                return tail[len(left) : end].strip()
            break
    line = tail.split("\n", 1)[0]
    line = re.split(r"(?i)\.\s+(?:I hope|This|So|Therefore|Thus)\b", line, maxsplit=1)[0]
    return line.strip().rstrip("*").strip().removesuffix(".").strip()


def stated_answer(response: str) -> str | None:
    """What follows the last 'the answer is' / 'Final Answer:' in the response; None if no such statement."""
    matches = list(_STATED.finditer(response))
    for match in reversed(matches):
        answer = _cut_statement(response[match.end() :])
        if answer:
            return answer
    return None


def single_line(response: str) -> str | None:
    """The response itself when it is one short line (a bare answer such as '0.5' or 'B'), else None."""
    text = response.strip()
    return text if text and "\n" not in text and len(text) <= 200 else None


def final_answer_text(response: str) -> str:
    """The text after the last 'Answer:' marker (if any), first non-empty line, stripped; '' if there is none."""
    tail = ANSWER_MARKER.split(response)[-1]
    for line in tail.splitlines():
        if line.strip():
            return line.strip()
    return ""


def answer_candidates(response: str) -> list[tuple[str, str]]:
    """(text, how) for each place a final answer may be, most explicit first: boxed, stated, bare single line."""
    found = [(last_boxed(response), "boxed"), (stated_answer(response), "stated"), (single_line(response), "bare")]
    return [(text, how) for text, how in found if text]


def plain(text: str, fold: bool = True) -> str:
    """Text for string comparison: math delimiters, \\text{} wrappers, markdown emphasis and a final period removed,
    whitespace collapsed, case folded (kept with `fold` false)."""
    text = TEXT_WRAPPER.sub(r"\1", text)
    text = text.replace("$", "").replace("**", "").replace("\\left", "").replace("\\right", "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\!", "").replace("\\,", "")
    text = re.sub(r"\s+", " ", text.strip().rstrip(".").strip())
    return text.casefold() if fold else text
