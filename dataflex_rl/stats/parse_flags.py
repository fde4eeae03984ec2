"""Benchmarks whose answers could not be parsed: reported, and kept out of a summary when the cause is the evaluator.

A low parse rate has two causes that look alike in one run: the model wrote no answer the extractor reads (a method
that broke the output format has genuinely failed there), or the extractor cannot read the format this model writes
(an evaluator fault: the paper's Llama math scores were 7 points off that way). They separate across runs. A benchmark
flagged (`parse_flagged` in the records) in every trained run of a model cell — every method, every seed — is an
evaluator or template fault for that model, so it is left out of all of that cell's summaries, the untrained base's
included, and named in `excluded_benchmarks`. A flag in some runs only is a result and stays in; every flag is listed
in the parse_flags table. The untrained base's own flags never exclude anything: the headroom measures what training
adds, format learning included, and lists them.
"""
from __future__ import annotations

import pandas as pd

from dataflex_rl.artefacts.layout import UNTRAINED

FLAG_COLUMNS = ["model", "method", "seed", "run_id", "benchmark", "domain", "parse_rate", "score", "action"]
EXCLUDED = "excluded: flagged in every trained run of the model"
KEPT_RUN = "kept: other trained runs of the model parse it"
KEPT_BASE = "kept: untrained base (headroom includes format learning)"


def excluded_benchmarks(records: pd.DataFrame) -> dict[str, list[str]]:
    """Per model: the benchmarks flagged in every one of its trained runs, in record order."""
    trained = records[records["method"] != UNTRAINED]
    flagged = trained["parse_flagged"].fillna(False).astype(bool)
    every = flagged.groupby([trained["model"], trained["benchmark"]], sort=False).all()
    out: dict[str, list[str]] = {}
    for (model, benchmark), all_flagged in every.items():
        if all_flagged:
            out.setdefault(model, []).append(benchmark)
    return out


def parse_flag_table(records: pd.DataFrame, excluded: dict[str, list[str]]) -> pd.DataFrame:
    """Every flagged (run, benchmark), its parse rate and score (points), and what the summaries did with it."""
    flagged = records[records["parse_flagged"].fillna(False).astype(bool)]
    if flagged.empty:
        return pd.DataFrame(columns=FLAG_COLUMNS)
    action = [EXCLUDED if benchmark in excluded.get(model, ()) else KEPT_BASE if method == UNTRAINED else KEPT_RUN
              for model, method, benchmark in zip(flagged["model"], flagged["method"], flagged["benchmark"])]
    return flagged.assign(score=100 * flagged["score"], action=action)[FLAG_COLUMNS].reset_index(drop=True)


def check_exclusions(records: pd.DataFrame, excluded: dict[str, list[str]]) -> None:
    """Refuse exclusions that would leave a model with a domain that has no benchmark (its DB would silently average
    fewer domains)."""
    for model, benchmarks in excluded.items():
        of_model = records[records["model"] == model]
        lost = set(of_model["domain"]) - set(of_model.loc[~of_model["benchmark"].isin(benchmarks), "domain"])
        if lost:
            raise ValueError(
                f"{model}: every benchmark of domain(s) {sorted(lost)} is flagged in every trained run "
                f"(parse rate below evaluation.min_parse_rate): {benchmarks}. The extractor cannot read this model's "
                f"answers there; fix the benchmark's prompt template or answer format, or lower "
                f"evaluation.min_parse_rate if the outputs really are unanswerable")
