"""(run, benchmark)s whose answers were cut at the length cap: reported beside the results, never dropped from them.

A cut answer is one the cap ended, not the model (vLLM's finish_reason "length";
dataflex_rl.records.run_records.cut_share). A high share says the cap is too short for the model, or that the model runs
on past its answer — a base model that does not stop at its template's turn end writes invented turns until the cap, and
the extractor may read an answer from them. Either way the score measures the cap as much as the skill, so every (run,
benchmark) above `evaluation.max_cut_share` is listed in the cut_flags table; the summaries are unchanged.
"""
from __future__ import annotations

import pandas as pd

CUT_FLAG_COLUMNS = ["model", "method", "seed", "run_id", "benchmark", "domain", "cut_share", "mean_length", "score"]


def cut_flag_table(records: pd.DataFrame, max_cut_share: float) -> pd.DataFrame:
    """Every (run, benchmark) whose cut_share is above `max_cut_share`, its mean length (tokens) and score (points),
    in record order. Records without a cut share (imported ones) are never flagged."""
    flagged = records[pd.to_numeric(records["cut_share"], errors="coerce").gt(max_cut_share)]
    if flagged.empty:
        return pd.DataFrame(columns=CUT_FLAG_COLUMNS)
    return flagged.assign(score=100 * flagged["score"])[CUT_FLAG_COLUMNS].reset_index(drop=True)
