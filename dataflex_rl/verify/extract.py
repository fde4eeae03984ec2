"""Answer extraction: find the model's final answer in a response, or report that there is none.

Every extractor returns None when the response states no answer it can read, so that a verifier can report a parse
failure separately from a wrong answer (an evaluator that scores what it cannot read as plain zero hides a broken
format as a bad model). Where a response states its answer several times, the last statement wins.
"""
from __future__ import annotations

import re
from typing import Sequence

LETTERS = "ABCDEFGHIJ"

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "The answer is", "Final Answer:", "**Final Answer**: ...", "the final answer is" (Minerva's form).
_STATED = re.compile(r"(?i)\b(?:final\s+answer|the\s+answer|answer)\b[*\s]*(?:is\b|:)[*\s:]*")
_ANSWER_MARKER = re.compile(r"(?i)\banswer\s*:")
_MATH_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\s*\{([^{}]*)\}")


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


def _cut_statement(tail: str) -> str:
    """The answer at the start of `tail`: a delimited math span, else the rest of the line up to the sentence's end."""
    tail = tail.lstrip()
    for left, right in _MATH_DELIMITERS:
        if tail.startswith(left):
            end = tail.find(right, len(left))
            if end > 0:
                return tail[len(left) : end].strip()
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
    tail = _ANSWER_MARKER.split(response)[-1]
    for line in tail.splitlines():
        if line.strip():
            return line.strip()
    return ""


def answer_candidates(response: str) -> list[tuple[str, str]]:
    """(text, how) for each place a final answer may be, most explicit first: boxed, stated, bare single line."""
    found = [(last_boxed(response), "boxed"), (stated_answer(response), "stated"), (single_line(response), "bare")]
    return [(text, how) for text, how in found if text]


def plain(text: str) -> str:
    """Text for string comparison: math delimiters, \\text{} wrappers, markdown emphasis and a final period removed,
    whitespace collapsed, case folded."""
    text = _TEXT_WRAPPER.sub(r"\1", text)
    text = text.replace("$", "").replace("**", "").replace("\\left", "").replace("\\right", "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\!", "").replace("\\,", "")
    return re.sub(r"\s+", " ", text.strip().rstrip(".").strip()).casefold()


# --- multiple choice -----------------------------------------------------------------------------------------------

def _letters(options: Sequence[str] | None) -> str:
    return LETTERS[: len(options)] if options else LETTERS


_LEADING_LETTER = re.compile(r"\(([A-J])\)|([A-J])(?:[.):,]|$)")
_LEADING_WORD_LETTER = re.compile(r"\(([A-J])\)|([A-J])(?:[.):,]|\s|$)")


def letter_of(text: str, options: Sequence[str] | None = None, stated: bool = True) -> str | None:
    """The option letter `text` names: 'B', '(B)', 'B.', 'B) 3500 J', '\\text{B}', or the text of option B itself.
    A `stated` text (one that follows 'the answer is') may also be 'B because ...'; a bare response may not, or
    'I think ...' would read as option I."""
    letters = _letters(options)
    cleaned = _TEXT_WRAPPER.sub(r"\1", text).replace("$", "").replace("*", "").strip()
    bare = re.fullmatch(r"\(?([A-Ja-j])\)?\.?", cleaned)
    if bare and bare.group(1).upper() in letters:
        return bare.group(1).upper()
    leading = (_LEADING_WORD_LETTER if stated else _LEADING_LETTER).match(cleaned)
    if leading and (leading.group(1) or leading.group(2)) in letters:
        return leading.group(1) or leading.group(2)
    if options:
        wanted = plain(cleaned)
        for letter, option in zip(letters, options):
            if wanted == plain(str(option)):
                return letter
    return None


def extract_choice(response: str, options: Sequence[str] | None = None) -> str | None:
    """The chosen option letter from a boxed letter, the last 'the answer is ...' (a letter or an option's text), the
    line after 'Answer:', or a bare one-line response; None if the response names no option."""
    places = [(text, True) for text, how in answer_candidates(response) if how != "bare"]
    if _ANSWER_MARKER.search(response):
        places.append((final_answer_text(response), True))
    places.append((single_line(response) or "", False))
    for text, stated in places:
        letter = letter_of(text, options, stated) if text else None
        if letter:
            return letter
    return None


# --- Knights & Knaves ----------------------------------------------------------------------------------------------

_ROLE = r"(?:is\s+an?|:|-|–|—|=)\s*(knight|knave)s?\b"
_ANY_ASSIGNMENT = re.compile(r"\b([A-Z][a-z]+)\s+is\s+an?\s+(knight|knave)\b", re.IGNORECASE)
_CONCLUSION = re.compile(r"(?i)\bconclusion\b|\bfinal\s+answer\b|\bthe\s+answer\s+is\b|\banswer\s*:")


def knights_knaves_assignments(text: str, names: Sequence[str] | None = None) -> dict[str, str]:
    """{'Zoey': 'knight', ...} from sentences such as 'Zoey is a knight, and Oliver is a knave' (or 'Zoey: knight');
    with `names`, only those people are read. A person stated twice keeps the last role."""
    if not names:
        return {name.capitalize(): role.lower() for name, role in _ANY_ASSIGNMENT.findall(text)}
    pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b\**\s*" + _ROLE, re.IGNORECASE)
    canonical = {n.casefold(): n for n in names}
    return {canonical[name.casefold()]: role.lower() for name, role in pattern.findall(text)}


def stated_assignments(response: str, names: Sequence[str] | None = None) -> dict[str, str]:
    """The response's final assignments: those after its last CONCLUSION / final-answer marker, else anywhere."""
    markers = list(_CONCLUSION.finditer(response))
    if markers:
        concluded = knights_knaves_assignments(response[markers[-1].start() :], names)
        if concluded:
            return concluded
    return knights_knaves_assignments(response, names)
