"""Verifier calibration: before anything is trained, every benchmark's verifier must give 1 to its gold answers written
the ways models write them, 0 to wrong answers in every form it accepts, and report a response that states no answer
as a parse failure, not as a wrong answer. A failure stops the DAG.

The surface forms are those of the benchmark's registered answer format; the verifier is the one the items name. A
benchmark whose items name another format (a math benchmark scored by the multiple-choice extractor) therefore fails,
and the error says that the extractor read none of the gold answers and names the benchmark and both formats.

Every item is checked, not a sample: a check costs milliseconds (a few seconds for a 1,319-item benchmark), and a
sample misses rare failures: 200 items (the old first-200 cut) catch a verifier that fails 0.5% of items with
probability 1 - 0.995^200 = 63%, and even a 500-item sample only 92%; the first rows of a file are no sample at all.
"""
from __future__ import annotations

import pandas as pd

from dataflex_rl.item_sources.registry import REGISTRY
from dataflex_rl.formats import get_format
from dataflex_rl.verify.verifiers import get_verifier


class CalibrationError(RuntimeError):
    """A verifier accepted a wrong answer, rejected a gold one, or claimed to parse a response without an answer."""


def calibrate_benchmark(name: str, items: pd.DataFrame) -> dict:
    """Run the benchmark's verifier on gold, corrupted and answer-less responses of every item; raise
    CalibrationError naming the benchmark and the formats on any wrong verdict."""
    if items.empty:
        raise CalibrationError(f"benchmark {name!r}: no items to calibrate on")
    formats = sorted(items["answer_format"].unique())
    registered = REGISTRY[name].answer_format if name in REGISTRY else None
    failures: list[str] = []
    gold_checked = gold_parsed = corrupt_checked = unparsed_checked = 0
    for item in items.to_dict("records"):
        verifier = get_verifier(item["answer_format"])
        surface = get_format(registered or item["answer_format"])
        answer = str(item["answer"]).strip()
        for response in surface.gold_forms(answer, item):
            gold_checked += 1
            verdict = verifier(response, item)
            gold_parsed += verdict.parsed
            if not (verdict.parsed and verdict.correct):
                failures.append(f"gold {response!r} for item {item['id']} scored 0 (parsed={verdict.parsed})")
        for response in surface.wrong_forms(answer, item):
            corrupt_checked += 1
            if verifier(response, item).correct:
                failures.append(f"wrong answer {response!r} for item {item['id']} (gold {item['answer']!r}) scored 1")
        for response in get_format(item["answer_format"]).no_answer:
            unparsed_checked += 1
            if verifier(response, item).parsed:
                failures.append(f"the answer-less response {response!r} for item {item['id']} was reported as "
                                "parsed (a parse failure must be reported as one)")
    report = {
        "benchmark": name,
        "answer_formats": formats,
        "registered_format": registered,
        "items": len(items),
        "gold_checked": gold_checked,
        "gold_parsed": gold_parsed,
        "corrupted_checked": corrupt_checked,
        "no_answer_checked": unparsed_checked,
        "failures": len(failures),
        "examples": failures[:10],
    }
    if failures:
        scored_as = ", ".join(formats)
        mismatch = ""
        if gold_parsed == 0:
            written = f"written as {registered} answers " if registered else ""
            mismatch = (f"the {scored_as} extractor parsed none of the {gold_checked} gold answers {written}— is "
                        f"answer_format {scored_as} right for this benchmark?; ")
        raise CalibrationError(
            f"verifier calibration failed for benchmark {name!r} (format {scored_as}): {mismatch}{len(failures)} of "
            f"{gold_checked + corrupt_checked + unparsed_checked} checks wrong, e.g. {failures[0]}"
        )
    return report
