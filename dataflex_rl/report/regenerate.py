"""Every table and figure of a study from its records table alone — no training or scoring output is read.

`regenerate(records, out_dir, controls)` writes each table in TABLES as CSV, Markdown and a LaTeX body under
`out_dir`, and each figure in FIGURES under `out_dir/figures`. The headline metric (DB-k) drives the comparisons
figure, the detectable-effect table and the cross-model table; the comparisons, equivalence-summary, sensitivity and
seed-sufficiency tables cover every summary; the long-training and constrained-data contrasts
(dataflex_rl.stats.contrasts) use the headline. The aggregates table and the performance profiles
(dataflex_rl.stats.aggregates) read the (seed, benchmark) scores, not a summary. A table that does not apply to these
records (no untrained base: no headroom; no response lengths: no efficiency; no parse or cut flags) is written with
its columns and no rows, so the rule's outputs are always the same files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from dataflex_rl.artefacts.layout import UNTRAINED
from dataflex_rl.report.figures import (domain_heatmap, forest_plot, performance_profile_plot, seed_sufficiency_plot,
                                        spearman_heatmap)
from dataflex_rl.report.outputs import TABLES
from dataflex_rl.report.tables import write_table
from dataflex_rl.stats.aggregates import aggregates, performance_profiles, score_matrices
from dataflex_rl.stats.contrasts import constrained_data_contrasts, long_training_contrasts, study_cells
from dataflex_rl.stats.equivalence_summary import equivalence_summary
from dataflex_rl.stats.paired import EQUIVALENCE_MARGIN, SPREAD_COLUMNS, compare_methods, headroom
from dataflex_rl.stats.cut_flags import cut_flag_table
from dataflex_rl.stats.parse_flags import check_exclusions, excluded_benchmarks, parse_flag_table
from dataflex_rl.stats.seeds import detectable_effects, seed_sufficiency
from dataflex_rl.stats.sensitivity import (benchmark_means, domain_tradeoffs, evaluation_sensitivity, method_means,
                                           summary_spearman_matrix)
from dataflex_rl.stats.summaries import math_heavy_benchmarks, run_summaries, summary_columns
from dataflex_rl.evaluate.settings import EvaluationSettings
from dataflex_rl.policies.catalogue import CATALOGUE

RUN_LEVEL_EXTRAS = ("base_model", "campaign", "regime", "source_run_id", "steps")


def cross_model_table(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Per model: its control's mean and, per method, "Δ [low, high]" in points (the scale / cross-model table)."""
    if comparisons.empty:
        return pd.DataFrame(columns=["model", "control", "control_mean"])
    cells = comparisons.assign(cell=[f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in
                                     zip(comparisons["delta_mean"], comparisons["ci_low"], comparisons["ci_high"])])
    wide = cells.pivot_table(index=["model", "control", "control_mean"], columns="method", values="cell",
                             aggfunc="first", sort=False)
    methods = list(pd.unique(comparisons["method"]))
    return wide[[m for m in methods if m in wide.columns]].reset_index().rename_axis(columns=None)


def scale_curve_table(comparisons: pd.DataFrame, summaries: pd.DataFrame) -> pd.DataFrame:
    """Per method, its "Δ [low, high]" in each model's reference cell (full data, the model's fewest steps), the cells
    in the records' order: a method's advantage across model sizes and families. Only methods compared in at least
    two cells: a curve needs two points."""
    columns = ["method", "control"]
    cells = study_cells(summaries)
    cells = cells[cells["regime"].isna() & cells["steps"].notna()]
    fewest = cells.groupby("base_model", sort=False)["steps"].transform("min")
    reference = list(cells.loc[cells["steps"] == fewest, "model"])
    picked = comparisons[comparisons["model"].isin(reference)]
    counts = picked.groupby("method")["model"].nunique()
    picked = picked[picked["method"].isin(counts[counts >= 2].index)]
    if picked.empty:
        return pd.DataFrame(columns=columns)
    picked = picked.assign(cell=[f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in
                                 zip(picked["delta_mean"], picked["ci_low"], picked["ci_high"])])
    wide = picked.pivot_table(index=columns, columns="model", values="cell", aggfunc="first", sort=False)
    return wide[[c for c in reference if c in wide.columns]].reset_index().rename_axis(columns=None)


def efficiency_table(records: pd.DataFrame) -> pd.DataFrame:
    """Per (model, method): mean response length in characters and tokens, and correct answers per 1,000 generated
    characters (comparable across tokenizers) and per 1,000 tokens — the trade the paper's GFPO finding is about.
    Lengths are item-weighted over every scored response. Rows only where the records report lengths."""
    known = records[records["mean_length"].notna() & (records["method"] != UNTRAINED)]
    columns = ["model", "method", "n_seeds", "mean_chars", "mean_length", "correct_per_1k_chars",
               "correct_per_1k_tokens"]
    if known.empty:
        return pd.DataFrame(columns=columns)
    known = known.assign(tokens=known["n"] * known["mean_length"], chars=known["n"] * known["mean_chars"])
    grouped = known.groupby(["model", "method"], sort=False)
    items = grouped["n"].sum()
    chars = grouped["chars"].agg(lambda c: c.sum(skipna=False))  # records from before mean_chars: NaN, not 0
    out = pd.DataFrame({
        "n_seeds": grouped["seed"].nunique(),
        "mean_chars": chars / items,
        "mean_length": grouped["tokens"].sum() / items,
        "correct_per_1k_chars": grouped["correct"].sum() / chars * 1000,
        "correct_per_1k_tokens": grouped["correct"].sum() / grouped["tokens"].sum() * 1000,
    })
    return out.reset_index()[columns]


def with_base_flags(headroom_table: pd.DataFrame, records: pd.DataFrame) -> pd.DataFrame:
    """The headroom table with each model's untrained-base benchmarks whose parse rate was flagged: the base's score
    there is mostly a format score, and so is that part of the gain."""
    base = records[(records["method"] == UNTRAINED) & records["parse_flagged"].fillna(False).astype(bool)]
    flagged = base.groupby("model", sort=False)["benchmark"].agg(", ".join)
    return headroom_table.assign(base_flagged=[flagged.get(model, "") for model in headroom_table["model"]])


def regenerate(records: pd.DataFrame, out_dir: str | Path, controls: Mapping[str, str], *, confidence: float = 0.95,
               bootstrap_resamples: int = 9999, max_subsets: int = 200,
               seed_counts: Sequence[int] = (3, 6, 12), pairing: str = "paired",
               max_cut_share: float = EvaluationSettings.max_cut_share,
               equivalence_margin: float = EQUIVALENCE_MARGIN,
               families: Mapping[str, str] | None = None) -> dict[str, pd.DataFrame]:
    """Write every table and figure of the study under `out_dir`; return the tables by name. `pairing` is
    dataflex_rl.stats.paired.PAIRINGS' choice for every comparison (config `stats.pairing`); `max_cut_share` the cut
    share above which a (run, benchmark) is listed in cut_flags (config `evaluation.max_cut_share`);
    `equivalence_margin` the ±points within which a comparison's verdict can be "equivalent" (config
    `stats.equivalence_margin`, docs/statistics.md); `families` each compared method's family for the equivalence
    summary (Study.families(); None: a method's name is its catalogued policy's, as in the released records)."""
    out_dir = Path(out_dir)
    extras = [c for c in RUN_LEVEL_EXTRAS if c in records.columns]
    excluded = excluded_benchmarks(records)
    check_exclusions(records, excluded)
    summaries = run_summaries(records, extra_keys=extras, excluded=excluded)
    metrics = summary_columns(summaries)
    headline = metrics[0]
    trained = summaries[summaries["method"] != UNTRAINED]

    comparisons = pd.concat([compare_methods(summaries, m, controls=controls, confidence=confidence,
                                             bootstrap_resamples=bootstrap_resamples, pairing=pairing,
                                             equivalence_margin=equivalence_margin, spread=True)
                             for m in metrics], ignore_index=True)
    if families is None:
        families = {method: str(CATALOGUE[method].family) for method in controls if method in CATALOGUE}
    equivalence = equivalence_summary(comparisons, families, 1 - confidence)
    comparisons = comparisons.drop(columns=SPREAD_COLUMNS)
    headline_comparisons = comparisons[comparisons["metric"] == headline].reset_index(drop=True)
    has_untrained = (summaries["method"] == UNTRAINED).any() and (summaries["method"] == "baseline").any()
    headroom_table = (with_base_flags(headroom(summaries, headline, confidence=confidence), records)
                      if has_untrained else
                      pd.DataFrame(columns=["model", "method", "metric", "n_seeds", "untrained", "trained_mean",
                                            "delta_mean", "ci_low", "ci_high", "sd", "p", "base_flagged"]))
    models = list(pd.unique(trained["model"]))
    spearman = {model: summary_spearman_matrix(summaries, model, metrics) for model in models}
    matrices = score_matrices(records, excluded)
    tables = {
        "run_summaries": summaries,
        "method_means": method_means(trained, metrics),
        "benchmark_means": benchmark_means(records[records["method"] != UNTRAINED]),
        "math_heavy_means": benchmark_means(records[records["method"] != UNTRAINED], math_heavy_benchmarks(records))
        if any(m.startswith("Math-Heavy-") for m in metrics) else pd.DataFrame(columns=["model", "method"]),
        "domain_tradeoffs": domain_tradeoffs(trained),
        "sensitivity": evaluation_sensitivity(trained, metrics),
        "summary_spearman": pd.concat([m.reset_index().assign(model=name) for name, m in spearman.items()],
                                      ignore_index=True)[["model", "metric", *metrics]],
        "comparisons": comparisons,
        "cross_model": cross_model_table(headline_comparisons),
        "scale_curve": scale_curve_table(headline_comparisons, summaries),
        "long_training": long_training_contrasts(summaries, headline, controls, confidence=confidence,
                                                 pairing=pairing),
        "constrained_data": constrained_data_contrasts(summaries, headline, controls, confidence=confidence,
                                                       pairing=pairing),
        "detectable_effects": detectable_effects(headline_comparisons, seed_counts),
        "seed_sufficiency": pd.concat([seed_sufficiency(trained, m, max_subsets=max_subsets,
                                                        complete_seeds_only=pairing != "paired") for m in metrics],
                                      ignore_index=True),
        "headroom": headroom_table,
        "efficiency": efficiency_table(records),
        "parse_flags": parse_flag_table(records, excluded),
        "cut_flags": cut_flag_table(records, max_cut_share),
        "equivalence_summary": equivalence,
        "aggregates": aggregates(matrices, controls, confidence=confidence, reps=bootstrap_resamples),
    }
    assert tuple(tables) == TABLES
    for name, table in tables.items():
        write_table(table, out_dir / name, latex=True)

    figures = out_dir / "figures"
    if headline_comparisons.empty:
        raise ValueError("no method has a control in these records; set methods.<m>.control in the config")
    forest_plot(headline_comparisons, figures / "forest_DB.png", headline, margin=equivalence_margin)
    domain_heatmap(tables["domain_tradeoffs"], figures / "domain_heatmap.png")
    spearman_heatmap(spearman, figures / "summary_spearman.png")
    sufficiency = tables["seed_sufficiency"]
    seed_sufficiency_plot(sufficiency[sufficiency["metric"] == headline], figures / "seed_sufficiency.png")
    performance_profile_plot(performance_profiles(matrices, confidence=confidence, reps=bootstrap_resamples),
                             figures / "performance_profiles.png", confidence)
    return tables
