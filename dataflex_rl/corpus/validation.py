"""Row validation for data files (training corpora, benchmark items): a bad row is quarantined, never silently dropped.

Every row read from a file is either kept or quarantined with a reason code (`REASONS`), so for each file
rows_in = rows_kept + rows_quarantined. Quarantined rows go to a JSONL file beside the rule's outputs, with the file, the
1-based line (JSONL) or row (parquet) number, the reason, a detail and the row (as built from the file, its other
columns in metadata; an unreadable line as its text). The quarantine file is not a declared output: Snakemake deletes a
failed job's outputs, and the rows must survive a failure. A file that cannot be read, or that keeps no row at all,
fails the job naming the file and the counts per reason. Whether a file lost too many rows is not decided here: the
quarantine gate compares the counts of the job's audit with `max_quarantine_fraction` in a job of its own
(dataflex_rl.corpus.quarantine_gate), so the threshold is no setting of the data.
"""
from __future__ import annotations

import codecs
import contextlib
import json
import math
import numbers
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Iterator, Mapping

import pandas as pd
import pyarrow
import pyarrow.parquet

from dataflex_rl.artefacts.atomic import write_text
from dataflex_rl.item_sources.loaders import UNREADABLE_ROWS
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.formats import FORMATS
from dataflex_rl.artefacts.items import DOMAINS, item_metadata, wrong_type
from dataflex_rl.corpus.validation_settings import ValidationSettings

# The reason codes a quarantined row can carry (docs/refusals.md shows an example and the detail text of each).
REASONS = ("invalid_utf8", "malformed_json", "wrong_type", "inconsistent_row", "missing_prompt", "missing_answer",
           "duplicate_id", "duplicate_prompt", "duplicate_item", "unknown_domain", "unknown_answer_format",
           "unparseable_answer", "prompt_too_long", "answer_too_long")

# Formats a training corpus file may declare (config/schema.yaml lists the same): not `procedural`, whose scorer needs
# the generators' metadata.
FILE_ANSWER_FORMATS = tuple(name for name, answer_format in FORMATS.items() if answer_format.in_corpus_files)
class DataValidationError(ValueError):
    """A data file cannot be read, or keeps no usable row."""


class BenchmarkContentWarning(UserWarning):
    """A benchmark that loads but may not measure what it should: repeated questions kept, or one gold answer
    throughout (a policy that always gives it scores 100%)."""


@dataclass
class FileReport:
    """One data file's tally: how many rows were read and which were quarantined, why; or why the file as a whole
    could not be read (`unreadable`: what was expected and what was found)."""

    path: str
    rows_in: int = 0
    quarantined: list[dict] = field(default_factory=list)
    unreadable: str | None = None

    def quarantine(self, line: int | None, reason: str, detail: str, row, item_id: str | None = None) -> None:
        assert reason in REASONS, reason
        self.quarantined.append({"file": self.path, "line": line, "id": item_id, "reason": reason, "detail": detail,
                                 "row": row})

    def by_reason(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self.quarantined:
            counts[record["reason"]] = counts.get(record["reason"], 0) + 1
        return dict(sorted(counts.items()))

    def summary(self) -> dict:
        return {"rows_in": self.rows_in, "rows_kept": self.rows_in - len(self.quarantined),
                "rows_quarantined": len(self.quarantined), "quarantined_by_reason": self.by_reason()}


_JSONL = "a JSONL file (UTF-8 text, one JSON object per line)"
_EXPECTED = {".parquet": "a parquet file", ".json": "a JSON file (UTF-8 text)", ".csv": "a CSV file (UTF-8 text)"}
# Byte-order marks, UTF-32 before UTF-16 (whose mark begins UTF-32 little-endian's).
_BYTE_ORDER_MARKS = ((b"\xff\xfe\x00\x00", "UTF-32 text"), (b"\x00\x00\xfe\xff", "UTF-32 text"),
                     (b"\xff\xfe", "UTF-16 text"), (b"\xfe\xff", "UTF-16 text"))


def _described(head: bytes) -> str:
    """What the first bytes of a file look like: a parquet file, text (quoted), or binary data."""
    if head.startswith(b"PAR1"):
        return "a parquet file"
    text = head.decode("utf-8", "ignore")
    if b"\x00" not in head and "".join(text.split()).isprintable():
        return f"text starting {text[:40]!r}"
    return f"binary data starting {head[:16]!r}"


def file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as the data file its suffix promises, or None: one line of the validation report
    (what was expected, what was found, the fix) instead of a reader's traceback."""
    expected = _EXPECTED.get(path.suffix, _JSONL)
    if path.is_dir():
        return f"expected {expected}, found a directory; give the path of the file itself"
    if not path.is_file():
        return f"expected {expected}, found nothing at this path"
    if path.stat().st_size == 0:
        return f"expected {expected}, found an empty file (0 bytes)"
    with path.open("rb") as handle:
        head = handle.read(64)
    if path.suffix == ".parquet":
        if not head.startswith(b"PAR1"):
            return (f"expected {expected}, found {_described(head)}; write it as parquet, or give a JSONL file the "
                    "suffix .jsonl")
        try:
            pyarrow.parquet.read_metadata(path)
        except (pyarrow.ArrowException, OSError, ValueError) as error:
            return f"expected {expected}, found one the parquet reader rejects ({error}); write it again"
        return None
    for mark, encoding in _BYTE_ORDER_MARKS:
        if head.startswith(mark):
            return f"expected {expected}, found {encoding} (byte-order mark {mark.hex(' ')}); save it as UTF-8"
    if b"\x00" in head:
        return (f"expected {expected}, found {_described(head)} (NUL bytes: UTF-16/32 text or a binary file); "
                "save it as UTF-8 JSONL")
    return None


def read_jsonl(path: Path, report: FileReport) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every readable line; an undecodable or malformed line is quarantined, not fatal.

    The file is read as bytes: a text reader would stop at the first bad byte (or mangle it) and lose the line number.
    Blank lines are not rows. A UTF-8 byte-order mark (Windows editors write one) is not part of the first row.
    """
    for number, raw in enumerate(path.read_bytes().removeprefix(codecs.BOM_UTF8).split(b"\n"), start=1):
        if not raw.strip():
            continue
        report.rows_in += 1
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            report.quarantine(number, "invalid_utf8", f"byte {error.start}: {error.reason}",
                              raw.decode("utf-8", "backslashreplace"))
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            report.quarantine(number, "malformed_json", f"column {error.colno}: {error.msg}", text)
            continue
        except (RecursionError, ValueError) as error:  # nesting too deep, an integer over Python's digit limit
            report.quarantine(number, "malformed_json", f"{type(error).__name__}: {str(error)[:200]}", text)
            continue
        if not isinstance(record, dict):
            report.quarantine(number, "malformed_json", f"a JSON {type(record).__name__}, not an object", text)
            continue
        yield number, record


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool) and not math.isnan(value)


def as_text(value) -> str | None:
    """A field's text: strings as they are, numbers written out (JSON golds are often numbers), else None."""
    if isinstance(value, str):
        return value
    return str(value) if _is_number(value) else None


def text_type_problem(field: str, value) -> str | None:
    """Why a text field's value is of the wrong type (a list, an object, a boolean, an infinite number: JSON's
    `Infinity`, which would be kept as the text 'inf'), or None: text, a finite number, or a missing value (null, NaN:
    quarantined as missing, not as a type)."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return wrong_type(field, value, "text or a finite number") if math.isinf(value) else None
    return wrong_type(field, value, "text or a number")


def item_problem(item: Mapping, formats: Collection[str], max_prompt_chars: int | None = None,
                 max_answer_chars: int | None = None) -> tuple[str, str] | None:
    """The first reason (code, detail) this item cannot be used, or None. `item` has text or None in prompt/answer."""
    if not (item["prompt"] or "").strip():
        return "missing_prompt", "the prompt is missing or empty"
    if not (item["answer"] or "").strip():
        return "missing_answer", "the gold answer is missing or empty"
    if item["domain"] not in DOMAINS:
        return "unknown_domain", f"domain {item['domain']!r}; use one of {', '.join(DOMAINS)}"
    if item["answer_format"] not in formats:
        return "unknown_answer_format", f"answer_format {item['answer_format']!r}; use one of {', '.join(formats)}"
    if max_prompt_chars is not None and len(item["prompt"]) > max_prompt_chars:
        return "prompt_too_long", f"{len(item['prompt'])} characters > {max_prompt_chars}"
    if max_answer_chars is not None and len(item["answer"]) > max_answer_chars:
        return "answer_too_long", f"{len(item['answer'])} characters > {max_answer_chars}"
    problem = FORMATS[item["answer_format"]].gold_problem(item)
    return ("unparseable_answer", problem) if problem else None


@dataclass
class KeptRows:
    """Ids (and, for a corpus, trimmed prompts) of the rows kept so far, so that a later duplicate is quarantined."""

    ids: set[str] = field(default_factory=set)
    prompts: set[str] | None = None

    def problem(self, item: Mapping) -> tuple[str, str] | None:
        if item["id"] in self.ids:
            return "duplicate_id", f"id {item['id']!r} is already used"
        if self.prompts is not None and item["prompt"].strip() in self.prompts:
            return "duplicate_prompt", "an identical prompt is already in the corpus"
        return None

    def add(self, item: Mapping) -> None:
        self.ids.add(item["id"])
        if self.prompts is not None:
            self.prompts.add(item["prompt"].strip())


def keep_valid(items: list[tuple[int | None, dict]], report: FileReport, kept: KeptRows, formats: Collection[str],
               settings: ValidationSettings | None = None) -> list[tuple[int | None, dict]]:
    """The (line, item) pairs that pass every check (the length caps of `settings` among them), in order; each other
    one is quarantined with its reason."""
    caps = (settings.max_prompt_chars, settings.max_answer_chars) if settings else ()
    good = []
    for line, item in items:
        problem = item_problem(item, formats, *caps) or kept.problem(item)
        if problem:
            report.quarantine(line, *problem, row=item, item_id=item["id"])
            continue
        kept.add(item)
        good.append((line, item))
    return good


def _failure(report: FileReport, quarantine: str | None) -> str | None:
    if report.unreadable:
        return f"{report.path}: {report.unreadable}"
    summary = report.summary()
    if summary["rows_kept"] == 0:
        counts = ", ".join(f"{reason} {n}" for reason, n in summary["quarantined_by_reason"].items()) or "none"
        inspect = f"; inspect {quarantine}" if quarantine else ""
        return (f"{report.path}: no usable row ({summary['rows_in']} read; quarantined: {counts}){inspect}; "
                "a row needs prompt (or question) and answer text")
    return None


def settle(reports: list[FileReport], quarantine: str | None) -> dict:
    """Write every quarantined row to `quarantine` (rewritten on each run, empty when nothing was quarantined), then
    fail if any file cannot be read or keeps no row; return the audit entry: counts per file and per reason, which
    the quarantine gate holds to its threshold."""
    records = [record for report in reports for record in report.quarantined]
    if quarantine is not None:
        write_text(quarantine, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records))
    failures = [message for report in reports if (message := _failure(report, quarantine))]
    if failures:
        raise DataValidationError("data validation failed:\n  " + "\n  ".join(failures))
    by_reason: dict[str, int] = {}
    for record in records:
        by_reason[record["reason"]] = by_reason.get(record["reason"], 0) + 1
    return {"files": {report.path: report.summary() for report in reports},
            "quarantine": {"path": quarantine, "rows": len(records), "by_reason": dict(sorted(by_reason.items()))}}


@contextlib.contextmanager
def screened_jsonl(path: str | None, report: FileReport) -> Iterator[str | None]:
    """For a JSONL file: quarantine its undecodable or malformed lines and yield a path a loader can read (a copy
    without them, or the file itself when every line is readable). Other paths (parquet, an absent file the loader
    reports or replaces from the hub) are yielded unchanged."""
    if path is None or Path(path).suffix != ".jsonl" or not Path(path).is_file():
        yield path
        return
    good = [number for number, _ in read_jsonl(Path(path), report)]
    if len(good) == report.rows_in:
        yield path
        return
    lines = Path(path).read_bytes().split(b"\n")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(path).name
        copy.write_bytes(b"".join(lines[number - 1] + b"\n" for number in good))
        yield str(copy)


def question_key(item: Mapping) -> str:
    """What makes two benchmark items the same question: the prompt and the options (MMLU-Pro asks one question with
    different option lists), with whitespace collapsed and case folded."""
    return "\n".join(" ".join(str(text).split()).casefold()
                     for text in [item["prompt"], *(item_metadata(item).get("options") or [])])


def duplicate_items(rows: list[dict]) -> dict[int, str]:
    """Position in `rows` -> the id of the first row asking the same question (question_key), for every later row."""
    first: dict[str, str] = {}
    duplicates = {}
    for position, row in enumerate(rows):
        key = question_key(row)
        if key in first:
            duplicates[position] = first[key]
        else:
            first[key] = row["id"]
    return duplicates


def _kept_duplicates(name: str, duplicates: dict[int, str], settings: ValidationSettings) -> str | None:
    if settings.allow_duplicates and duplicates:
        return (f"benchmark {name!r}: {len(duplicates)} item(s) repeat an earlier question and are kept "
                "(data_validation.benchmarks.allow_duplicates: true); each counts in the denominator")
    return None


def _identical_golds(name: str, rows: list[dict]) -> str | None:
    golds = {row["answer"] for row in rows}
    if len(rows) > 1 and len(golds) == 1:
        return (f"benchmark {name!r}: all {len(rows)} gold answers are {golds.pop()!r}; a policy that always answers "
                "that scores 100% — check the file's answer column")
    return None


def validated_benchmark_items(load: Callable[[str | list[str] | None], pd.DataFrame], name: str,
                              path: str | list[str] | None, settings: ValidationSettings,
                              quarantine: str | None) -> tuple[pd.DataFrame, dict]:
    """Benchmark items as `load(path)` returns them, less quarantined rows; and the audit. `path` is the benchmark's
    file, or the list of files that make it. A file that cannot be read at all fails first; unreadable JSONL lines are
    quarantined before the loader sees the file (by line number); the rows the loader could not read (a field of the
    wrong type) and the loaded rows that fail a check or repeat an earlier question are then quarantined by id (a
    loader may filter or reorder the file's lines, so a loaded row has no line number). Repeated questions are kept,
    and counted in the audit, under `allow_duplicates`; identical gold answers throughout are a warning, in the audit
    and the log."""
    paths = benchmark_paths(path) if path is not None else []
    report = FileReport(", ".join(paths) or name)
    problems = [f"{file}: {problem}" if len(paths) > 1 else problem
                for file in paths if Path(file).exists() and (problem := file_problem(Path(file)))]
    if problems:
        report.unreadable = "; ".join(problems)
        settle([report], quarantine)
    with contextlib.ExitStack() as stack:
        readable = [stack.enter_context(screened_jsonl(file, report)) for file in paths]
        if report.quarantined and len(report.quarantined) == report.rows_in:
            settle([report], quarantine)  # every line unreadable: fails before the loader sees no rows
        items = load(None if path is None else readable[0] if isinstance(path, str) else readable)
    for row in items.attrs.pop(UNREADABLE_ROWS, []):
        report.quarantine(None, row["reason"], f"source row {row['source_index']}: {row['detail']}", row["row"])
    report.rows_in = len(report.quarantined) + len(items)
    rows = items.to_dict("records")
    for row in rows:
        row["prompt"], row["answer"] = as_text(row["prompt"]), as_text(row["answer"])
    kept = [row for _, row in keep_valid([(None, row) for row in rows], report, KeptRows(), tuple(FORMATS), settings)]
    duplicates = duplicate_items(kept)
    if not settings.allow_duplicates:
        for position, first_id in duplicates.items():
            report.quarantine(None, "duplicate_item", f"the same question as item {first_id!r} (whitespace and case "
                              "aside); remove it, or set data_validation.benchmarks.allow_duplicates: true",
                              row=kept[position], item_id=kept[position]["id"])
        kept = [row for position, row in enumerate(kept) if position not in duplicates]
    audit = {"benchmark": name, **settle([report], quarantine)}
    notes = [note for note in (_kept_duplicates(name, duplicates, settings), _identical_golds(name, kept)) if note]
    if settings.allow_duplicates and duplicates:
        audit["duplicate_items_kept"] = len(duplicates)
    if notes:  # only then: a clean benchmark's audit stays as it was
        audit["warnings"] = notes
    for note in notes:
        warnings.warn(note, BenchmarkContentWarning, stacklevel=2)
    kept_rows = {id(row) for row in kept}
    return items[[id(row) in kept_rows for row in rows]].reset_index(drop=True), audit
