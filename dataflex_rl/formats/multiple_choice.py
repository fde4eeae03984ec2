"""The `multiple_choice` answer format (ZebraLogic, MMLU-Pro, GPQA, the science stand-ins): an option, named by its
letter or by its text; the gold is the bare letter."""
from __future__ import annotations

import re
from typing import Mapping, Sequence

from dataflex_rl.formats.base import AnswerFormat, Verdict
from dataflex_rl.formats.extract import (ANSWER_MARKER, TEXT_WRAPPER, answer_candidates, final_answer_text, plain,
                                         single_line)
from dataflex_rl.artefacts.items import LETTERS, item_metadata

TEMPLATE = ("{question}\n\n{options}\n\nAnswer with the letter of the correct option. Reason step by step, then finish "
            "with \"The answer is (X)\", where X is that letter.")


def item_options(item: Mapping) -> list[str]:
    """The item's option texts, from its metadata `options` (or `choices`); [] when it has none."""
    metadata = item_metadata(item)
    return [str(o) for o in metadata.get("options", metadata.get("choices")) or []]


def _letters(options: Sequence[str] | None) -> str:
    return LETTERS[: len(options)] if options else LETTERS


_LEADING_LETTER = re.compile(r"\(([A-J])\)|([A-J])(?:[.):,]|$)")
_LEADING_WORD_LETTER = re.compile(r"\(([A-J])\)|([A-J])(?:[.):,]|\s|$)")


def option_text_key(text: str, fold: bool, spaced: bool = True) -> str:
    """A text for comparison with an option's: extract.plain's (math delimiters, \\text{} wrappers, a final period
    removed, whitespace collapsed) with every `*` (markdown emphasis, or a product) dropped; case folded with `fold`;
    with `spaced` false, without any whitespace."""
    key = plain(text.replace("*", ""), fold)
    return key if spaced else key.replace(" ", "")


_MARKUP = re.compile(r"[$\\]")


def _option_named(text: str, options: Sequence[str], fold: bool) -> str | None:
    """The letter of the option whose text `text` is (case folded with `fold`), or None. An option written in LaTeX
    ('$-1.5$$\\text{kJ}$') is compared without whitespace, so that '-1.5 kJ' and '$-1.5$ $\\text{kJ}$' name it."""
    for letter, option in zip(_letters(options), options):
        spaced = not _MARKUP.search(str(option))
        if option_text_key(text, fold, spaced) == option_text_key(str(option), fold, spaced):
            return letter
    return None


def letter_of(text: str, options: Sequence[str] | None = None, stated: bool = True) -> str | None:
    """The option letter `text` names: 'B', '(B)', 'B.', the text of option B itself (before a lower-case letter or a
    leading one, so that an option 'c' or 'I & II only' is not read as a letter), 'b', 'B) 3500 J', '\\text{B}', or
    option B's text in another case. A `stated` text (one that follows 'the answer is') may also be 'B because ...';
    a bare response may not, or 'I think ...' would read as option I."""
    letters = _letters(options)
    cleaned = TEXT_WRAPPER.sub(r"\1", text).replace("$", "").replace("*", "").strip()
    bare = re.fullmatch(r"\(?([A-Ja-j])\)?\.?", cleaned)
    if bare and bare.group(1) in letters:
        return bare.group(1)
    if options and (letter := _option_named(text, options, fold=False)):
        return letter
    if bare and bare.group(1).upper() in letters:
        return bare.group(1).upper()
    leading = (_LEADING_WORD_LETTER if stated else _LEADING_LETTER).match(cleaned)
    if leading and (leading.group(1) or leading.group(2)) in letters:
        return leading.group(1) or leading.group(2)
    return _option_named(text, options, fold=True) if options else None


def extract_choice(response: str, options: Sequence[str] | None = None) -> str | None:
    """The chosen option letter from a boxed letter, the last 'the answer is ...' (a letter or an option's text), the
    line after 'Answer:', or a one-line response (a short one naming a letter or an option, a longer one only as an
    option's whole text, see _long_option_line); None if the response names no option."""
    places = [(text, True) for text, how in answer_candidates(response) if how != "bare"]
    if ANSWER_MARKER.search(response):
        places.append((final_answer_text(response), True))
    places.append((single_line(response) or "", False))
    for text, stated in places:
        letter = letter_of(text, options, stated) if text else None
        if letter:
            return letter
    line = response.strip()
    return _long_option_line(line, options) if options and line and "\n" not in line else None


_LETTERED = re.compile(r"\(?([A-J])[).:]\s*(.+)")


def _long_option_line(line: str, options: Sequence[str]) -> str | None:
    """The option a one-line response too long to read as a bare answer names: its whole text, alone or after its
    own letter ('H) Phase angle at t = 0: ...')."""
    lettered = _LETTERED.fullmatch(line)
    if lettered and _option_named(lettered.group(2), options, fold=False) == lettered.group(1):
        return lettered.group(1)
    return _option_named(line, options, fold=False)


def verify_multiple_choice(response: str, item: Mapping) -> Verdict:
    letter = extract_choice(response, item_options(item))
    return Verdict(parsed=letter is not None, correct=letter == str(item["answer"]).strip().upper())


def choice_forms(letter: str, options: list[str]) -> list[str]:
    """Option `letter` the ways models name it: the letter in its usual wrappings and, where the item lists its
    options, the option's text (on one line, as a model writes it)."""
    forms = [letter, f"({letter})", f"{letter}.", f"The answer is ({letter}).", f"Answer: {letter}",
             f"Comparing the options, the answer is {letter} because it fits every clue.", f"\\boxed{{{letter}}}"]
    if letter in LETTERS[: len(options)]:
        text = " ".join(options[LETTERS.index(letter)].split())
        forms += [f"{letter}) {text}", text, f"The answer is {text}."]
    return forms


def gold_forms(answer: str, item: Mapping) -> list[str]:
    return choice_forms(answer, item_options(item))


def wrong_forms(answer: str, item: Mapping) -> list[str]:
    """The other letters (of at least A-D), one of them stated, and the text of the first wrong option."""
    options = item_options(item)
    wrong = [letter for letter in LETTERS[: max(len(options), 4)] if letter != answer]
    texts = [options[LETTERS.index(w)] for w in wrong[:1] if options]
    return wrong + [f"The answer is ({letter})." for letter in wrong[:1]] + texts


_OPTION_LINE = re.compile(r"^\s*\(?([A-J])[).:]\s", re.MULTILINE)


def option_letters(item: Mapping) -> str:
    """The item's option letters: from a metadata `options`/`choices` list (real benchmarks keep their options
    there), else from the prompt's lettered lines ('A) ...', as the science generator writes them)."""
    metadata = item_metadata(item)
    options = metadata.get("options", metadata.get("choices"))
    if isinstance(options, list) and options:
        return LETTERS[: len(options)]
    return "".join(sorted(set(_OPTION_LINE.findall(item["prompt"]))))


def gold_problem(item: Mapping) -> str | None:
    answer = item["answer"]
    letter, letters = extract_choice(answer), option_letters(item)
    if letter is None:
        return f"{answer!r} is not an option letter"
    if answer.strip() != letter:
        return f"write the gold as the bare letter {letter!r} (the verifier compares letters), not {answer!r}"
    if not letters:
        return "no options found (a metadata options/choices list or lettered 'A) ...' lines in the prompt)"
    if letter not in letters:
        return f"gold letter {letter!r} is not among the item's options {', '.join(letters)}"
    return None


def lettered_options(options: Sequence[str]) -> str:
    """'A) first\\nB) second ...', the listing the option-text matching of `letter_of` mirrors."""
    if len(options) > len(LETTERS):
        raise ValueError(f"{len(options)} options; at most {len(LETTERS)} can be lettered A-J")
    return "\n".join(f"{letter}) {text}" for letter, text in zip(LETTERS, options))


def template_fields(item: Mapping) -> dict[str, str]:
    """The template's `options`: the item's metadata `options`, lettered."""
    options = item_metadata(item).get("options")
    if not options:
        raise ValueError("a multiple-choice prompt needs the item's options (metadata 'options')")
    return {"options": lettered_options(options)}


FORMAT = AnswerFormat("multiple_choice", verify_multiple_choice, gold_forms, wrong_forms, gold_problem,
                      template=TEMPLATE, template_fields=template_fields)
