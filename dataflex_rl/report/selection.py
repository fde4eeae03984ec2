"""The prompt-selection tables, from the runs' per-step metrics (the round_* columns a selection round writes on its
first step; docs/prompt_selection.md):

- `selection_rounds`: one row per (cell, method, seed, round) — every round column, and the seconds the round's
  training steps took besides the selection;
- `selection_composition`: per cell and method, the kept set's corrupted / target-domain / easy shares at the first and
  the last round (the chunk's share is the base rate), mean over seeds, and the paired difference from the cell's
  random-prompts method over matched seeds — the shape of the seed paper's Tables 1–2;
- `selection_overhead`: per cell and method, the measured selection time over training time (median over rounds and
  seeds) beside the FLOP model (8·M·k_r + 6·|P_v|·k_v) / (6·|S_r|·n_t), n_t = epochs × K the training rollouts per
  kept prompt per round, with the terms the method pays for.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd

from dataflex_rl.stats.paired import paired_difference_ci

LABELS = ("corrupted", "target", "easy")
SELECTION_PHASES = ("candidate_rollouts", "candidate_backward", "validation")
KEYS = ["model", "method", "seed"]


def selection_rounds(metrics: pd.DataFrame) -> pd.DataFrame:
    """`metrics`: the per-step metrics of prompt-selection runs with model (the cell), method and seed columns."""
    if metrics.empty or "round" not in metrics:
        return pd.DataFrame(columns=[*KEYS, "round"])
    metrics = metrics.sort_values([*KEYS, "step"])
    rounds = metrics.dropna(subset=["round"]).copy()
    rounds["round"] = rounds["round"].astype(int)
    round_of_step = metrics.groupby(KEYS)["round"].ffill()  # a run's first step opens its first round
    step_seconds = metrics.groupby([*KEYS, round_of_step])["seconds"].sum().rename("round_seconds_steps")
    rounds = rounds.join(step_seconds, on=[*KEYS, "round"])
    rounds["round_seconds_selection"] = rounds[[f"round_seconds_{p}" for p in SELECTION_PHASES]].sum(axis=1)
    rounds["round_seconds_training"] = rounds["round_seconds_steps"] - rounds["round_seconds_selection"]
    columns = [*KEYS, "step", *[c for c in rounds.columns if c.startswith("round")]]
    return rounds[columns].reset_index(drop=True)


def _at(rounds: pd.DataFrame, which: str) -> pd.DataFrame:
    """Each run's first or last round."""
    position = rounds.groupby(KEYS)["round"].transform("min" if which == "first" else "max")
    return rounds[rounds["round"] == position]


def selection_composition(rounds: pd.DataFrame, random_methods: Mapping[str, str], confidence: float) -> pd.DataFrame:
    """`random_methods`: per cell, the method drawing prompts at random (the reference of the paired differences)."""
    rows = []
    for which in ("first", "last"):
        picked = _at(rounds, which)
        for (cell, method), runs in picked.groupby(["model", "method"], sort=False):
            row = {"model": cell, "method": method, "round": which, "round_index": int(runs["round"].max()),
                   "seeds": runs["seed"].nunique()}
            reference = picked[(picked["model"] == cell) & (picked["method"] == random_methods.get(cell))]
            for label in LABELS:
                kept = dict(zip(runs["seed"], 100 * runs[f"round_kept_{label}"]))
                row[f"chunk_{label}_pct"] = 100 * runs[f"round_chunk_{label}"].mean()
                row[f"kept_{label}_pct"] = float(np.mean(list(kept.values())))
                base = dict(zip(reference["seed"], 100 * reference[f"round_kept_{label}"]))
                row.update(_difference(label, kept, base, method == random_methods.get(cell), confidence))
            rows.append(row)
    return pd.DataFrame(rows)


def _difference(label: str, kept: dict, base: dict, is_reference: bool, confidence: float) -> dict[str, float]:
    names = [f"{label}_vs_random", f"{label}_vs_random_low", f"{label}_vs_random_high"]
    values = [float("nan")] * 3
    finite = all(np.isfinite(v) for v in (*kept.values(), *base.values()))
    if base and not is_reference and finite and set(kept) & set(base):
        ci = paired_difference_ci(kept, base, confidence, allow_unpaired=True)
        values = [ci.mean, ci.ci_low, ci.ci_high]
    return dict(zip(names, values))


def flop_overhead(round_row: Mapping, signal: str | None) -> float:
    """The FLOP model of one round's selection over its training: 2NT per generated token and 6NT per trained token,
    per response, for the candidates' rollouts (2·M·k_r), their gradients (6·M·k_r, gradient policies) and the
    validation gradient (6·|P_v|·k_v, validation-probe policies), over the RL update 6·|S_r|·n_t. For GradAlign this is
    the seed paper's (8·M·k_r + 6·|P_v|·k_v) / (6·|S_r|·n_t)."""
    candidates = round_row["round_candidates"] * round_row["round_rollouts_candidate"]
    flops = 2 * candidates
    if signal in ("validation_gradient", "candidate_gradient"):
        flops += 6 * candidates
    if signal == "validation_gradient":
        flops += 6 * round_row["round_validation_size"] * round_row["round_rollouts_validation"]
    training = round_row["round_epochs"] * round_row["round_training_rollouts"]
    return flops / (6 * round_row["round_kept"] * training)


def selection_overhead(rounds: pd.DataFrame, signals: Mapping[str, str | None]) -> pd.DataFrame:
    """`signals`: per method, its policy's signal (policies.catalogue)."""
    rows = []
    for (cell, method), runs in rounds.groupby(["model", "method"], sort=False):
        measured = runs["round_seconds_selection"] / runs["round_seconds_training"]
        first = runs.iloc[0]
        n_t = first["round_epochs"] * first["round_training_rollouts"]
        rows.append({
            "model": cell, "method": method, "rounds": len(runs), "M": int(first["round_candidates"]),
            "kept": int(first["round_kept"]), "k_r": int(first["round_rollouts_candidate"]),
            "k_v": int(first["round_rollouts_validation"]), "P_v": int(first["round_validation_size"]), "n_t": n_t,
            "measured_pct": 100 * float(measured.median()),
            "flop_model_pct": 100 * flop_overhead(first, signals.get(method)),
            "q_k_r_over_n_t": first["round_candidates"] / first["round_kept"] * first["round_rollouts_candidate"] / n_t,
            **{f"seconds_{phase}": float(runs[f"round_seconds_{phase}"].median()) for phase in SELECTION_PHASES},
            "seconds_training": float(runs["round_seconds_training"].median()),
        })
    return pd.DataFrame(rows)
