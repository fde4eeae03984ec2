"""Does a method's advantage survive a change of regime? Long training and constrained data as contrasts of cells.

A study cell is one (model, campaign, regime) of the records (`model` in the records; imported records carry the
`base_model`, `regime` and `steps` beside it). Cells of the same base model that differ in one factor — the number of
training steps, or the data regime (a data subset, label noise) — are contrasted with the reference cell (the fewest
steps; the full data): per method, its paired Δ vs control in the reference cell, its Δ in the variant cell, and the
change between the two with Welch's interval, since the two cells' runs are separate trainings (their seeds share a
number, not a run). The control's own shift (how much uniform GRPO gains from 1,000 steps, or loses on 25% of the
data) is reported beside it. Within a cell Δ is over the seeds both arms share; with `pairing` "paired" a seed on one
side only is an error.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.stats.paired import POINTS, arm_values, mean_t_interval, paired_difference_ci, welch_difference_ci

CONTRAST_COLUMNS = ["base_model", "reference", "reference_cell", "variant", "variant_cell", "method", "control", "n_seeds", "control_reference",
                    "control_variant", "control_shift", "delta_reference", "delta_variant", "variant_ci_low",
                    "variant_ci_high", "change", "change_low", "change_high", "change_p"]
FULL_DATA = "full data"


def study_cells(summaries: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (`model`): its base model, regime (None: full data) and steps (None if its runs differ)."""
    frame = pd.DataFrame({
        "model": summaries["model"],
        "base_model": summaries["base_model"] if "base_model" in summaries else summaries["model"],
        "regime": [None if pd.isna(r) else str(r) for r in summaries["regime"]] if "regime" in summaries else None,
        "steps": summaries["steps"] if "steps" in summaries else pd.NA,
    })
    trained = frame[summaries["seed"].notna().to_numpy()]
    steps = trained.groupby("model", sort=False)["steps"].agg(lambda s: s.iloc[0] if s.nunique() == 1 else None)
    cells = trained.drop_duplicates("model").set_index("model")[["base_model", "regime"]]
    return cells.assign(steps=steps).reset_index()


def _within_cell(runs: pd.DataFrame, method: str, control: str, metric: str, pairing: str) -> dict[int, float]:
    """Seed → method − control inside one cell."""
    treated, base = arm_values(runs, method, metric), arm_values(runs, control, metric)
    cell = runs["model"].iloc[0]
    diff = paired_difference_ci(treated, base, allow_unpaired=pairing != "paired",
                                names=(f"{cell}/{method}", f"{cell}/{control}"))
    return {s: treated[s] - base[s] for s in diff.seeds}


def _contrast_rows(summaries: pd.DataFrame, reference: str, variant: str, labels: Mapping[str, str], base_model: str,
                   metric: str, controls: Mapping[str, str], confidence: float, pairing: str) -> list[dict]:
    ref_runs, var_runs = (summaries[summaries["model"] == cell] for cell in (reference, variant))
    rows = []
    for method, control in controls.items():
        present = [set(runs["method"]) for runs in (ref_runs, var_runs)]
        if not all({method, control} <= have for have in present):
            continue
        d_ref = _within_cell(ref_runs, method, control, metric, pairing)
        d_var = _within_cell(var_runs, method, control, metric, pairing)
        variant_ci = mean_t_interval(tuple(d_var), np.array(list(d_var.values())), confidence)
        change = welch_difference_ci(d_var, d_ref, confidence)
        c_ref = np.mean(list(arm_values(ref_runs, control, metric).values()))
        c_var = np.mean(list(arm_values(var_runs, control, metric).values()))
        rows.append({
            "base_model": base_model, "reference": labels[reference], "reference_cell": reference,
            "variant": labels[variant], "variant_cell": variant, "method": method,
            "control": control, "n_seeds": min(len(d_ref), len(d_var)),
            "control_reference": POINTS * c_ref, "control_variant": POINTS * c_var,
            "control_shift": POINTS * (c_var - c_ref),
            "delta_reference": POINTS * float(np.mean(list(d_ref.values()))),
            "delta_variant": POINTS * variant_ci.mean, "variant_ci_low": POINTS * variant_ci.ci_low,
            "variant_ci_high": POINTS * variant_ci.ci_high, "change": POINTS * change.mean,
            "change_low": POINTS * change.ci_low, "change_high": POINTS * change.ci_high, "change_p": change.t_p_value,
        })
    return rows


def _contrasts(summaries: pd.DataFrame, metric: str, controls: Mapping[str, str], factor: str, confidence: float,
               pairing: str) -> pd.DataFrame:
    cells = study_cells(summaries)
    other = "regime" if factor == "steps" else "steps"
    cells = cells[cells["steps"].notna()]
    rows = []
    for (base_model, _), group in cells.groupby(["base_model", cells[other].map(str)], sort=False):
        if group[factor].nunique(dropna=False) < 2:
            continue
        if factor == "steps":
            at_reference = group["steps"] == group["steps"].min()
            labels = {cell: f"{int(steps)} steps" for cell, steps in zip(group["model"], group["steps"])}
        else:
            at_reference = group["regime"].isna()
            labels = {cell: FULL_DATA if pd.isna(regime) else regime
                      for cell, regime in zip(group["model"], group["regime"])}
        # Several cells can sit at one level (the main and mixer campaigns both ran 300 steps on full data); each
        # pair contributes the methods both cells ran.
        for reference in group.loc[at_reference, "model"]:
            for variant in group.loc[~at_reference, "model"]:
                rows += _contrast_rows(summaries, reference, variant, labels, base_model, metric, controls,
                                       confidence, pairing)
    return pd.DataFrame(rows, columns=CONTRAST_COLUMNS)


def long_training_contrasts(summaries: pd.DataFrame, metric: str, controls: Mapping[str, str], *,
                            confidence: float = 0.95, pairing: str = "paired") -> pd.DataFrame:
    """Per base model and data regime with cells at several step counts: each longer cell against the shortest."""
    return _contrasts(summaries, metric, controls, "steps", confidence, pairing)


def constrained_data_contrasts(summaries: pd.DataFrame, metric: str, controls: Mapping[str, str], *,
                               confidence: float = 0.95, pairing: str = "paired") -> pd.DataFrame:
    """Per base model and step count with a full-data cell: each constrained-data regime against the full data."""
    return _contrasts(summaries, metric, controls, "regime", confidence, pairing)
