"""The study's tables from a records table alone: run summaries, training headroom and paired comparisons."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from dataflex_rl.report.tables import write_table
from dataflex_rl.stats.paired import compare_methods, headroom
from dataflex_rl.stats.summaries import run_summaries


def headline_metric(summaries: pd.DataFrame) -> str:
    """The domain-balanced headline column, DB-<number of benchmarks>."""
    return next(c for c in summaries.columns if c.startswith("DB-"))


def write_study_tables(records: pd.DataFrame, out_dir: str | Path, controls: Mapping[str, str],
                       confidence: float = 0.95) -> None:
    out_dir = Path(out_dir)
    summaries = run_summaries(records)
    metric = headline_metric(summaries)
    write_table(summaries, out_dir / "run_summaries")
    write_table(headroom(summaries, metric, confidence=confidence), out_dir / "headroom")
    write_table(compare_methods(summaries, metric, controls=controls, confidence=confidence), out_dir / "comparisons")
