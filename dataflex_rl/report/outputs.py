"""The names of a study's tables and figures, importable without pandas or matplotlib (the Snakefile needs them at
parse time, and every dry run pays for what it imports)."""
from __future__ import annotations

from pathlib import Path

TABLES = ("run_summaries", "method_means", "benchmark_means", "math_heavy_means", "domain_tradeoffs", "sensitivity",
          "summary_spearman", "comparisons", "cross_model", "scale_curve", "long_training", "constrained_data",
          "detectable_effects", "seed_sufficiency", "headroom", "efficiency", "parse_flags", "cut_flags",
          "equivalence_summary", "aggregates")
TABLE_FORMATS = ("csv", "md", "tex")
FIGURES = ("forest_DB.png", "domain_heatmap.png", "summary_spearman.png", "seed_sufficiency.png",
           "performance_profiles.png")


def table_paths(out_dir: str | Path) -> list[str]:
    return [f"{out_dir}/{name}.{ext}" for name in TABLES for ext in TABLE_FORMATS]


def figure_paths(out_dir: str | Path) -> list[str]:
    return [f"{out_dir}/figures/{name}" for name in FIGURES]
