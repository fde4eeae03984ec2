"""Records from elsewhere: the DataFlex-RL authors' released run table, and the loader the tables rule reads.

The released table (`all_runs_171.csv`) has one row per training run and one column per benchmark holding accuracy in
percent. A record's `score` is that value as printed (divided by 100), so every mean of scores the tables print is a
mean of the authors' values. Counts are needed only where items are pooled (the Item summary), so each column's
evaluated size n is inferred from the values themselves: every score is correct/n, printed either at full float
precision or rounded to one decimal. `infer_benchmark_size` takes, in order,
  1. the smallest n for which every value is exactly a multiple of 100/n, if that n is finer than the printing grid
     (the data then proves the size: e.g. MMLU-Pro values are all even tenths, so 500 items, not the full 1,132);
  2. the registry's size, if every value is the rounding of some k/size at its printed precision;
  3. the smallest n for which every value is such a rounding.
For the released file this gives math500 500, aime24 30, olympiadbench 675, minerva_math 272, gsm8k 1319, kk_hard 200,
bbh_logical_deduction 750, bbh_tracking 750, zebra_logic_mc 500, gpqa_diamond 198, mmlu_pro_chemistry 500,
mmlu_pro_physics 500 (tests/test_records_import.py holds these). correct = round(score · n), and the rows are marked
`counts_inferred` (dataflex_rl.records.run_records). Rounding the printed score to a count would move it: 6.2 on
Minerva-Math becomes 17/272 = 6.25.

The same (model, method, seed) appears in several campaigns (the 7B-Instruct baseline is in main, constrained and
long_training), so a record's `model` is the study cell "{model}@{campaign}[:{regime}]"; the model itself, campaign,
regime and the authors' run id stay as extra columns.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from dataflex_rl.item_sources.registry import PAPER_BENCHMARKS
from dataflex_rl.artefacts.layout import run_id, study_cell
from dataflex_rl.records.run_records import RECORD_COLUMNS, validate_records

# The released table's column name → the registry's paper benchmark name.
RELEASED_BENCHMARKS = {
    "math500": "MATH-500",
    "aime24": "AIME-2024",
    "olympiadbench": "OlympiadBench",
    "minerva_math": "Minerva-Math",
    "gsm8k": "GSM8K",
    "kk_hard": "Knights&Knaves",
    "bbh_logical_deduction": "BBH-logical-deduction",
    "bbh_tracking": "BBH-tracking-shuffled-objects",
    "zebra_logic_mc": "ZebraLogic",
    "gpqa_diamond": "GPQA-Diamond",
    "mmlu_pro_chemistry": "MMLU-Pro-chemistry",
    "mmlu_pro_physics": "MMLU-Pro-physics",
}
RELEASED_RUN_COLUMNS = ("run_id", "campaign", "model", "method", "seed", "steps", "regime")
EXTRA_COLUMNS = ("base_model", "campaign", "regime", "source_run_id")
MAX_SIZE = 5000


class InferredSize(NamedTuple):
    """A benchmark's evaluated size and how it was found: "exact", "registry" or "rounding" (module docstring)."""

    n: int
    how: str


def _decimals(text: str) -> int:
    """Decimal places as printed ("40.0" → 1, "31.818181818181817" → 15)."""
    text = text.strip().lower()
    if "e" in text:
        return 17
    return len(text.split(".", 1)[1]) if "." in text else 0


def _tolerance(printed: list[str]) -> np.ndarray:
    """Half a unit in each value's last printed place: how far the printed percent may be from k/n·100."""
    return np.array([max(0.5 * 10.0 ** -_decimals(t), 1e-9) for t in printed]) * (1 + 1e-9)


def _rounding_consistent(percent: np.ndarray, tolerance: np.ndarray, n: int) -> bool:
    k = np.round(percent * n / 100)
    return bool(np.all(np.abs(k * 100 / n - percent) <= tolerance))


def infer_benchmark_size(printed: list[str], registry_size: int | None = None) -> InferredSize:
    """The evaluated size behind a column of printed percentages (module docstring for the order of evidence)."""
    percent = np.array([float(t) for t in printed])
    if len(percent) == 0 or not np.all((percent >= 0) & (percent <= 100)):
        raise ValueError("percentages must be present and lie in [0, 100]")
    grid = min(100 * 10 ** max(_decimals(t) for t in printed), MAX_SIZE + 1)
    for n in range(1, grid):
        x = percent * n / 100
        if np.all(np.abs(x - np.round(x)) <= 1e-6):
            return InferredSize(n, "exact")
    tolerance = _tolerance(printed)
    if registry_size is not None and _rounding_consistent(percent, tolerance, registry_size):
        return InferredSize(registry_size, "registry")
    for n in range(1, MAX_SIZE + 1):
        if _rounding_consistent(percent, tolerance, n):
            return InferredSize(n, "rounding")
    raise ValueError(f"no benchmark size up to {MAX_SIZE} explains every value")


def import_released_runs(path: str | Path, sizes: dict[str, int] | None = None) -> pd.DataFrame:
    """The authors' wide run table as validated records, one row per (run, benchmark), plus EXTRA_COLUMNS.

    `sizes` (released column → n) overrides the inference; a value that is not correct/n for its size at its printed
    precision is an error naming the run and column.
    """
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in (*RELEASED_RUN_COLUMNS, *RELEASED_BENCHMARKS) if c not in raw.columns]
    if missing:
        raise ValueError(f"{path}: not the released run table; lacks columns {missing}")
    if raw["run_id"].duplicated().any():
        raise ValueError(f"{path}: run ids repeat: {sorted(raw['run_id'][raw['run_id'].duplicated()])[:5]}")
    sizes = dict(sizes or {})
    rows = []
    for column, benchmark in RELEASED_BENCHMARKS.items():
        present = raw[raw[column].str.strip() != ""]
        printed = present[column].tolist()
        if column not in sizes:
            sizes[column] = infer_benchmark_size(printed, PAPER_BENCHMARKS[benchmark].size).n
        n = sizes[column]
        percent = np.array([float(t) for t in printed])
        correct = np.round(percent * n / 100).astype(int)
        off = np.abs(correct * 100 / n - percent) > _tolerance(printed)
        if off.any():
            bad = present["run_id"][off].tolist()
            raise ValueError(f"{column}: values of runs {bad[:5]} are not correct/{n} at their printed precision")
        domain = PAPER_BENCHMARKS[benchmark].domain
        for run, k, pct in zip(present.itertuples(index=False), correct, percent):
            regime = run.regime.strip() or None
            cell = study_cell(run.model, run.campaign, regime)
            seed = int(run.seed)
            rows.append({
                "model": cell, "method": run.method, "seed": seed, "run_id": run_id(cell, run.method, seed),
                "benchmark": benchmark, "domain": domain, "n": n, "correct": int(k), "score": pct / 100,
                "counts_inferred": True, "mean_length": math.nan, "mean_chars": math.nan, "parse_rate": math.nan,
                "parse_flagged": None, "steps": int(run.steps),
                # The release states neither the configs nor the environment of its runs: no provenance.
                "fingerprint": None, "package_versions": None,
                "base_model": run.model, "campaign": run.campaign, "regime": regime, "source_run_id": run.run_id,
            })
    frame = pd.DataFrame(rows, columns=[*RECORD_COLUMNS, *EXTRA_COLUMNS])
    frame = frame.astype({"seed": "Int64", "steps": "Int64", "n": "int64", "correct": "int64",
                          "counts_inferred": "bool", "mean_length": "float64", "mean_chars": "float64",
                          "parse_rate": "float64", "parse_flagged": "boolean"})
    validate_records(frame)
    return frame


def load_records(path: str | Path) -> pd.DataFrame:
    """A validated records table from a path: tidy parquet or CSV (every one of RECORD_COLUMNS; a table lacking any is
    refused, naming them), or the authors' released wide CSV."""
    path = Path(path)
    if path.suffix == ".parquet":
        frame = pd.read_parquet(path)
    elif path.suffix == ".csv":
        header = pd.read_csv(path, nrows=0).columns
        if set(RELEASED_RUN_COLUMNS) <= set(header) and set(RELEASED_BENCHMARKS) <= set(header):
            return import_released_runs(path)
        frame = pd.read_csv(path, dtype={"seed": "Int64", "steps": "Int64"})
    else:
        raise ValueError(f"{path}: records must be .parquet or .csv")
    validate_records(frame)
    return frame
