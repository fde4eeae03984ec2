"""The parse gate: before any training, the untrained base model's own answers must be readable by each benchmark's
extractor.

Verifier calibration proves an extractor reads the gold answer written the ways models write it; it cannot know which
of those ways this model uses. A model that states its math answers in a form the extractor does not read scores
zero on a whole benchmark — the paper's Llama numbers were 7 points off that way. The base model's scores (rule
`score` on the untrained base) already hold, per item, whether an answer was parsed; a benchmark whose parse rate is
below `calibration.min_base_parse_rate` stops the DAG before a single training job starts, naming the benchmark, its
parse rate and unparsed responses to look at.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

EXAMPLES = 3


class ParseGateError(RuntimeError):
    """The base model's answers to some benchmark could not be parsed often enough."""


def base_parse_report(model: str, scores: Mapping[str, pd.DataFrame], min_parse_rate: float) -> dict:
    """Per benchmark: items, parsed, parse rate and up to EXAMPLES unparsed responses; `failed` lists the benchmarks
    below `min_parse_rate`."""
    benchmarks = {}
    for name, items in scores.items():
        parsed = items["parsed"].astype(bool)
        rate = float(parsed.mean()) if len(items) else 0.0
        benchmarks[name] = {
            "items": int(len(items)), "parsed": int(parsed.sum()), "parse_rate": rate,
            "passed": rate >= min_parse_rate,
            "unparsed_examples": items.loc[~parsed, "response"].head(EXAMPLES).tolist(),
        }
    failed = [name for name, entry in benchmarks.items() if not entry["passed"]]
    return {"model": model, "min_base_parse_rate": min_parse_rate, "benchmarks": benchmarks, "failed": failed}


def check_base_parse_rates(model: str, scores: Mapping[str, pd.DataFrame], min_parse_rate: float) -> dict:
    """The report of `base_parse_report`; raises ParseGateError naming every failing benchmark and the fix."""
    report = base_parse_report(model, scores, min_parse_rate)
    if report["failed"]:
        lines = [f"{name}: parse rate {report['benchmarks'][name]['parse_rate']:.3f} "
                 f"({report['benchmarks'][name]['parsed']} of {report['benchmarks'][name]['items']}); unparsed, e.g. "
                 f"{report['benchmarks'][name]['unparsed_examples'][:1]}" for name in report["failed"]]
        raise ParseGateError(
            f"parse gate failed for model {model!r}: its untrained answers to {len(lines)} benchmark(s) are parsed "
            f"less often than calibration.min_base_parse_rate = {min_parse_rate}:\n  " + "\n  ".join(lines)
            + "\nThe extractor cannot read how this model answers: fix the benchmark's prompt template or answer "
            "format (docs/benchmarks.md), or lower calibration.min_base_parse_rate if the base model really cannot "
            "answer in the format yet")
    return report
