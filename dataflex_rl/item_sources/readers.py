"""Native-schema readers for the paper's 12 real benchmarks: each benchmark's columns and how one of its rows becomes
an item (`prompt` the question as the benchmark states it, `answer` the gold in the form its verifier reads, derived
metadata such as `options` and `names`).

Gold conversions: GSM8K's "... #### 1,234" → "1234"; OlympiadBench's `final_answer` list → its answers joined by ", " (a
multi-answer row's also listed in metadata `answers`); Minerva's last \\boxed{} of the solution where the file has no
`answer`; Knights&Knaves' `names` + `solution` booleans → "Zoey is a knight, Oliver is a knave"; ZebraLogic's answer
text and MMLU-Pro's `answer_index` → the option letter; GPQA's correct answer → its letter after a seeded shuffle of the
four options (the displayed order of the source columns is kept in metadata `option_sources`).
"""
from __future__ import annotations

import contextlib
import json
import math
import numbers
import random
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from dataflex_rl.formats.extract import last_boxed
from dataflex_rl.artefacts.items import LETTERS, wrong_type


@dataclass(frozen=True)
class NativeItem:
    """One row read in its benchmark's schema: the prompt, the gold answer, and what the reader derived."""

    prompt: str
    answer: str
    derived: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Reader:
    """How one benchmark's rows become items.

    `columns` is the native schema: the columns a file must have, in the order an error lists them. `read` turns a
    row into the prompt, the answer and derived metadata; it consumes every column of the schema but the native id
    (`id_column`, used when the file has it) and `kept_columns` (MMLU-Pro's `category`, which the loader filters on).
    The file's other columns go to metadata as they are. `renames` maps the column names of a known variant of the
    schema. `alternatives` names, for a column of the schema, another column a known variant gives instead (the
    Qwen2.5-Math harness's Minerva file has no `answer`: its gold is the last \\boxed{} of `solution`).
    """

    read: Callable[[Mapping], NativeItem]
    columns: tuple[str, ...]
    id_column: str | None = None
    kept_columns: tuple[str, ...] = ()
    renames: Mapping[str, str] = field(default_factory=dict)
    alternatives: Mapping[str, str] = field(default_factory=dict)

    @property
    def consumed(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c != self.id_column and c not in self.kept_columns)


class BenchmarkSchemaError(ValueError):
    """A benchmark file or hub split that does not have the benchmark's native columns, or a row it cannot read."""


class UnreadableRowError(BenchmarkSchemaError):
    """One row the reader cannot turn into an item: the loader reports it for quarantine under `reason` (a reason
    code of dataflex_rl.corpus.validation) instead of failing the whole file."""

    reason = "inconsistent_row"


class FieldTypeError(UnreadableRowError):
    """A native field of one row holding another type than its reader expects (a list or an object where text is
    expected, text where a list is): the loader reports the row for quarantine instead of reading the value's str()."""

    reason = "wrong_type"


def text_field(value, field: str) -> str:
    """A native field as text: a finite number written out (JSON golds are often numbers), a missing one (null, NaN)
    as '', which row validation quarantines as missing; any other type is a FieldTypeError naming `field`."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, numbers.Number)):
        raise FieldTypeError(wrong_type(field, value, "text"))
    if isinstance(value, numbers.Number) and math.isinf(value):  # JSON's Infinity: not the gold 'inf'
        raise FieldTypeError(wrong_type(field, value, "text or a finite number"))
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip()


def _sequence(value, field: str, lone_text: bool = False) -> list:
    """A native list field: a list, a parquet array, or JSON text of a list; with `lone_text`, a text value is a list
    of one (OlympiadBench's final_answer). Anything else is a FieldTypeError naming `field`."""
    if isinstance(value, str) and value.strip().startswith("["):
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(value)
    elif isinstance(value, str) and lone_text:
        value = [value]
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise FieldTypeError(wrong_type(field, value, "a list"))
    return list(value)


def _texts(value, field: str, lone_text: bool = False) -> list[str]:
    """A native list of text (multiple-choice options, names): each element type-checked as text."""
    return [text_field(element, f"{field}[{i}]") for i, element in enumerate(_sequence(value, field, lone_text))]


def _booleans(value, field: str) -> list[bool]:
    values = _sequence(value, field)
    for i, element in enumerate(values):
        if not isinstance(element, (bool, np.bool_)):
            raise FieldTypeError(wrong_type(f"{field}[{i}]", element, "true or false"))
    return [bool(element) for element in values]


def _index(value, field: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number) or not float(value).is_integer():
        raise FieldTypeError(wrong_type(field, value, "an integer"))
    return int(value)


def _unwrapped(answer: str) -> str:
    """One OlympiadBench answer without its math delimiters (an escaped `\\$` is kept) or a final period."""
    return re.sub(r"(?<!\\)\$", "", answer).strip().removesuffix(".").strip()


def _math(question: str, answer: str) -> Callable[[Mapping], NativeItem]:
    return lambda row: NativeItem(text_field(row[question], question), text_field(row[answer], answer))


def _minerva(row: Mapping) -> NativeItem:
    """Minerva's gold is its `answer`, or in the Qwen2.5-Math harness's file the last \\boxed{} of its `solution`."""
    question = text_field(row["question"], "question")
    if "answer" in row:
        return NativeItem(question, text_field(row["answer"], "answer"))
    gold = last_boxed(text_field(row["solution"], "solution"))
    if gold is None:
        raise UnreadableRowError("the solution has no \\boxed{} answer")
    return NativeItem(question, gold)


def _gsm8k(row: Mapping) -> NativeItem:
    """GSM8K's gold is the number after '####' at the end of the worked solution (commas are thousands separators)."""
    solution = text_field(row["answer"], "answer")
    final = solution.rsplit("####", 1)[-1].strip().replace(",", "")
    question = text_field(row["question"], "question")
    return NativeItem(question, final, {"solution": solution} if "####" in solution else {})


_SPAN_BREAK = re.compile(r"\$\s*,\s*\$")


def _olympiad(row: Mapping) -> NativeItem:
    """OlympiadBench's `final_answer` is a list; one element may hold several answers as math spans ('$69$,$84$').
    A row with `is_multiple_answer` true lists its answers in metadata `answers`: the gold is their set."""
    answers = [answer for element in _texts(row["final_answer"], "final_answer", lone_text=True)
               for answer in map(_unwrapped, _SPAN_BREAK.split(element.strip()))]
    return NativeItem(text_field(row["question"], "question"), ", ".join(answers),
                      {"answers": answers} if row.get("is_multiple_answer") is True else {})


def kk_gold(names: list[str], solution: list) -> str:
    """'Zoey is a knight, Oliver is a knave': K&K's solution booleans (True = knight), as the verifier reads them."""
    return ", ".join(f"{name} is a {'knight' if bool(is_knight) else 'knave'}" for name, is_knight in
                     zip(names, solution, strict=True))


def _knights_knaves(row: Mapping) -> NativeItem:
    names, solution = _texts(row["names"], "names"), _booleans(row["solution"], "solution")
    if len(names) != len(solution):
        raise UnreadableRowError(f"{len(names)} names but {len(solution)} solution values")
    return NativeItem(text_field(row["quiz"], "quiz"), kk_gold(names, solution), {"names": names})


_BBH_OPTION = re.compile(r"^\(([A-J])\)\s*(.+?)\s*$", re.MULTILINE)


def bbh_options(question: str) -> list[str]:
    """The '(A) text' lines of a BBH input, in letter order ([] unless they run A, B, C, ... without a gap)."""
    found = dict(_BBH_OPTION.findall(question))
    letters = LETTERS[: len(found)]
    return [found[letter] for letter in letters] if set(found) == set(letters) else []


def _bbh(row: Mapping) -> NativeItem:
    question, target = text_field(row["input"], "input"), text_field(row["target"], "target")
    options = bbh_options(question)
    return NativeItem(question, target, {"options": options} if options else {})


def _unambiguous(options: list[str], gold: int, field: str, labels: Sequence[str] = LETTERS) -> list[str]:
    """The options of a multiple-choice row, refused when another option is the gold's text (whitespace aside): a
    model that picks the copy of the correct answer would be scored wrong. Wrong options that repeat each other are
    kept as shipped (two GPQA-Diamond rows have them): the gold letter is still one, and harnesses show them all.
    `labels` names each option in the refusal (GPQA's add the source column). More options than letters A-J are
    refused here, at load, not when the score job letters them."""
    if len(options) > len(LETTERS):
        raise UnreadableRowError(f"{field}: {len(options)} options; at most {len(LETTERS)} can be lettered A-J")
    key = " ".join(options[gold].split())
    for position, option in enumerate(options):
        if position != gold and " ".join(option.split()) == key:
            raise UnreadableRowError(f"{field}: option {labels[position]} is the same text as the correct answer, "
                                     f"option {labels[gold]}: {option!r}; a copy of the correct answer makes the "
                                     f"gold letter ambiguous")
    return options


def _zebra(row: Mapping) -> NativeItem:
    choices = _texts(row["choices"], "choices")
    answer = text_field(row["answer"], "answer")
    if answer not in choices:
        raise UnreadableRowError(f"answer {answer!r} is not one of the choices {choices}")
    prompt = f"{text_field(row['puzzle'], 'puzzle')}\n\n{text_field(row['question'], 'question')}"
    gold = choices.index(answer)
    return NativeItem(prompt, LETTERS[gold], {"options": _unambiguous(choices, gold, "choices")})


def _mmlu_pro(row: Mapping) -> NativeItem:
    """MMLU-Pro pads some option lists with 'N/A': those are dropped and the gold letter taken from answer_index."""
    options = _texts(row["options"], "options")
    index = _index(row["answer_index"], "answer_index")
    if not 0 <= index < min(len(options), len(LETTERS)):
        raise UnreadableRowError(f"answer_index {index} is not the position of one of the row's {len(options)} "
                                 f"options (0 to {len(options) - 1})")
    if LETTERS[index] != text_field(row["answer"], "answer"):
        raise UnreadableRowError(f"answer {row['answer']!r} disagrees with answer_index {index}")
    kept = [i for i, option in enumerate(options) if option != "N/A" or i == index]
    gold = kept.index(index)
    return NativeItem(text_field(row["question"], "question"), LETTERS[gold],
                      {"options": _unambiguous([options[i] for i in kept], gold, "options")})


GPQA_SHUFFLE_SEED = 42
_GPQA_OPTION_COLUMNS = ("Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def gpqa_order(key: str, seed: int = GPQA_SHUFFLE_SEED) -> list[int]:
    """The displayed order of GPQA's four option columns for the item `key`: a shuffle seeded by (seed, key), so an
    item's letters do not depend on which other items the file holds or their order."""
    order = list(range(len(_GPQA_OPTION_COLUMNS)))
    random.Random(f"{seed}:{key}").shuffle(order)
    return order


def _gpqa(row: Mapping) -> NativeItem:
    key = text_field(row["Record ID"], "Record ID") if "Record ID" in row else text_field(row["Question"], "Question")
    order = gpqa_order(key)
    sources = [_GPQA_OPTION_COLUMNS[i] for i in order]
    gold = order.index(0)  # the position of the column, not of its text: one letter even when wrong options repeat
    options = _unambiguous([" ".join(text_field(row[column], column).split()) for column in sources], gold,
                           "Correct Answer / Incorrect Answer 1-3",
                           [f"{letter} ({column})" for letter, column in zip(LETTERS, sources)])
    return NativeItem(text_field(row["Question"], "Question"), LETTERS[gold],
                      {"options": options, "option_sources": sources, "shuffle_seed": GPQA_SHUFFLE_SEED})


MATH_500 = Reader(_math("problem", "answer"), ("problem", "answer"), "unique_id")
AIME_2024 = Reader(_math("problem", "answer"), ("problem", "answer", "id"), "id",
                   renames={"Problem": "problem", "Answer": "answer", "ID": "id", "Solution": "solution"})
OLYMPIADBENCH = Reader(_olympiad, ("question", "final_answer", "id"), "id")
MINERVA_MATH = Reader(_minerva, ("question", "answer"), renames={"problem": "question"},
                      alternatives={"answer": "solution"})
GSM8K = Reader(_gsm8k, ("question", "answer"))
KNIGHTS_KNAVES = Reader(_knights_knaves, ("quiz", "names", "solution"))
BBH = Reader(_bbh, ("input", "target"))
ZEBRALOGIC = Reader(_zebra, ("id", "puzzle", "question", "choices", "answer"), "id")
MMLU_PRO = Reader(_mmlu_pro, ("question", "options", "answer", "answer_index", "category"), "question_id",
                  kept_columns=("category",))
GPQA_DIAMOND = Reader(_gpqa, ("Question", *_GPQA_OPTION_COLUMNS), "Record ID")
