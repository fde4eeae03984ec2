"""Verifier calibration: before anything is trained, every benchmark's verifier must give 1 to its gold answers written
the ways models write them, and 0 to corrupted answers in every format it claims. A failure stops the DAG."""
from __future__ import annotations

import json
import re
from typing import Mapping

import pandas as pd

from dataflex_rl.verify.verifiers import get_verifier

_SWAPS = {"yes": "No", "no": "Yes", "true": "False", "false": "True", "knight": "knave", "knave": "knight"}


class CalibrationError(RuntimeError):
    """A verifier accepted a wrong answer or rejected a gold one."""


def _options(item: Mapping) -> list[str]:
    metadata = item.get("metadata")
    if isinstance(metadata, str) and metadata:
        metadata = json.loads(metadata)
    return list((metadata or {}).get("options", []))


def _perturbed(answer: str) -> str:
    """A wrong answer of the same shape: a number moved by one, a yes/no flipped, otherwise the text altered."""
    text = answer.strip()
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + 1)
    if re.fullmatch(r"-?\d*\.\d+", text):
        return str(float(text) + 1)
    swapped = re.sub(r"(?i)\b(yes|no|true|false|knight|knave)\b", lambda m: _SWAPS[m.group(1).lower()], text, count=1)
    if swapped != text:
        return swapped
    return text[::-1] if text[::-1].casefold() != text.casefold() else text + "x"


def gold_responses(item: Mapping) -> list[str]:
    """The gold answer in the surface forms a model produces for this format."""
    answer, fmt = str(item["answer"]).strip(), item["answer_format"]
    if fmt == "multiple_choice":
        forms = [answer, f"({answer})", f"{answer}.", f"The answer is ({answer})."]
        options = _options(item)
        if options:
            forms.append(f"{answer}) {options['ABCDEFGHIJ'.index(answer)]}")
        return forms
    if fmt == "math":
        return [answer, f"\\boxed{{{answer}}}", f"The answer is ${answer}$."]
    return [answer, f"Answer: {answer}"]


def corrupted_responses(item: Mapping) -> list[str]:
    """Wrong answers in every form the format accepts, plus an empty response."""
    answer, fmt = str(item["answer"]).strip(), item["answer_format"]
    if fmt == "multiple_choice":
        letters = "ABCDEFGHIJ"[: max(len(_options(item)), 4)]
        wrong = [letter for letter in letters if letter != answer]
        return wrong + [f"The answer is ({letter})." for letter in wrong[:1]] + [""]
    wrong = _perturbed(answer)
    if fmt == "math":
        return [wrong, f"\\boxed{{{wrong}}}", ""]
    return [wrong, f"Answer: {wrong}", ""]


def calibrate_benchmark(name: str, items: pd.DataFrame, max_items: int | None = None) -> dict:
    """Run the benchmark's verifier on gold and corrupted answers; raise CalibrationError naming the benchmark."""
    if items.empty:
        raise CalibrationError(f"benchmark {name!r}: no items to calibrate on")
    rows = items.head(max_items) if max_items else items
    formats = sorted(rows["answer_format"].unique())
    failures: list[str] = []
    gold_checked = corrupt_checked = 0
    for item in rows.to_dict("records"):
        verifier = get_verifier(item["answer_format"])
        for response in gold_responses(item):
            gold_checked += 1
            verdict = verifier(response, item)
            if not (verdict.parsed and verdict.correct):
                failures.append(f"gold {response!r} for item {item['id']} scored 0 (parsed={verdict.parsed})")
        for response in corrupted_responses(item):
            corrupt_checked += 1
            if verifier(response, item).correct:
                failures.append(f"wrong answer {response!r} for item {item['id']} (gold {item['answer']!r}) scored 1")
    report = {
        "benchmark": name,
        "answer_formats": formats,
        "items": len(rows),
        "gold_checked": gold_checked,
        "corrupted_checked": corrupt_checked,
        "failures": len(failures),
        "examples": failures[:10],
    }
    if failures:
        raise CalibrationError(
            f"verifier calibration failed for benchmark {name!r} (format {', '.join(formats)}): {len(failures)} of "
            f"{gold_checked + corrupt_checked} checks wrong, e.g. {failures[0]}"
        )
    return report
