"""Figures. Built on a bare matplotlib Figure with the Agg canvas, so no pyplot state or display is involved."""
from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dataflex_rl.artefacts.atomic import atomic_path


FOREST_DPI = 150


def forest_plot(comparison_df: pd.DataFrame, path: str | os.PathLike, metric: str,
                margin: float | None = None) -> None:
    """PNG of each method's paired Δ versus its control with its CI, from a `compare_methods` table (points).

    A vertical line marks Δ = 0, so an interval that excludes it is visible at a glance; with `margin`, a shaded band
    marks ±margin, the equivalence margin (docs/statistics.md). A method whose CI is NaN (fewer than two seeds) is
    drawn as a point without a bar.
    """
    if comparison_df.empty:
        raise ValueError("nothing to plot: the comparison table is empty")
    df = comparison_df.iloc[::-1]  # first row at the top
    several_models = df["model"].nunique() > 1
    labels = [f"{m} · {t} vs {c}" if several_models else f"{t} vs {c}"
              for m, t, c in zip(df["model"], df["method"], df["control"])]
    delta = df["delta_mean"].to_numpy(float)
    errors = np.nan_to_num(np.vstack([delta - df["ci_low"].to_numpy(float), df["ci_high"].to_numpy(float) - delta]))
    y = np.arange(len(df))

    width, height = 4.0 + 0.07 * max(map(len, labels)), 1.0 + 0.3 * len(df)
    fig = Figure(figsize=(width, height), dpi=FOREST_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if margin is not None:
        ax.axvspan(-margin, margin, color="C2", alpha=0.15, linewidth=0, label=f"equivalence margin ±{margin:g}")
        ax.legend(loc="lower right", fontsize="small", frameon=False)
    ax.axvline(0.0, color="0.5", linewidth=1, linestyle="--")
    ax.errorbar(delta, y, xerr=errors, fmt="o", color="C0", ecolor="C0", capsize=3)
    ax.set_yticks(y, labels)
    ax.set_xlabel(f"Δ {metric} vs control (percentage points, paired t CI)")
    # The left margin fits the widest label, measured by the renderer the PNG is drawn with (which keeps the text
    # layouts for the draw): one drawing pass, where a layout engine draws the figure once more to measure it.
    renderer = fig.canvas.get_renderer()
    label_width = max(label.get_window_extent(renderer).width for label in ax.get_yticklabels()) / FOREST_DPI
    fig.subplots_adjust(left=(label_width + 0.15) / width, right=1 - 0.15 / width, bottom=0.5 / height,
                        top=1 - 0.05 / height)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=FOREST_DPI)


def _panels(count: int, width: float, height: float, ncols: int = 3, left: float = 1.6,
            bottom: float = 0.8) -> tuple[Figure, list]:
    """A Figure with one axes per panel on a grid of up to `ncols` columns, unused cells hidden.

    Margins are fixed in inches (`left` for tick labels, `bottom` for rotated ones) rather than left to a layout
    engine: constrained layout measures every annotation again and made a 12-panel heatmap take seconds.
    """
    ncols = max(1, min(ncols, count))
    nrows = math.ceil(count / ncols)
    fig = Figure(figsize=(width * ncols, height * nrows))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False,
                        gridspec_kw=dict(left=left / (width * ncols), right=1 - 0.2 / (width * ncols),
                                         bottom=bottom / (height * nrows), top=1 - 0.9 / (height * nrows),
                                         wspace=left / (width - left), hspace=(bottom + 0.4) / (height - bottom)))
    axes = axes.ravel().tolist()
    for ax in axes[count:]:
        ax.set_visible(False)
    return fig, axes[:count]


def _save(fig: Figure, path: str | os.PathLike) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=100)


def domain_heatmap(tradeoffs: pd.DataFrame, path: str | os.PathLike) -> None:
    """PNG: per model, methods × domains (and the headline) coloured by the method's difference from the model's mean
    in that column, annotated with the value in points — the domain trade-offs at a glance."""
    if tradeoffs.empty:
        raise ValueError("nothing to plot: the trade-off table is empty")
    columns = [c for c in tradeoffs.columns if c not in ("model", "method", "n_seeds")]
    models = list(pd.unique(tradeoffs["model"]))
    height = 1.6 + 0.25 * tradeoffs.groupby("model").size().max()
    fig, axes = _panels(len(models), 1.8 + 0.8 * len(columns), height, left=1.2, bottom=0.5)
    for ax, model in zip(axes, models):
        block = tradeoffs[tradeoffs["model"] == model]
        values = block[columns].to_numpy(float)
        centred = values - np.nanmean(values, axis=0)
        limit = np.nanmax(np.abs(centred)) or 1.0
        ax.imshow(centred, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            dark = abs(centred[i, j]) > 0.6 * limit
            ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
        ax.set_xticks(range(len(columns)), [c.removeprefix("domain:") for c in columns], fontsize=8)
        ax.set_yticks(range(len(block)), block["method"], fontsize=8)
        ax.set_title(model, fontsize=9)
    fig.suptitle("Mean over seeds (points); colour: difference from the model's mean", fontsize=9)
    _save(fig, path)


def spearman_heatmap(matrices: dict[str, pd.DataFrame], path: str | os.PathLike) -> None:
    """PNG: per model, Spearman ρ between the method rankings of every pair of summaries."""
    if not matrices:
        raise ValueError("nothing to plot: no Spearman matrices")
    size = len(next(iter(matrices.values())))
    fig, axes = _panels(len(matrices), 1.6 + 0.7 * size, 1.6 + 0.7 * size, left=1.2, bottom=1.0)
    for ax, (model, matrix) in zip(axes, matrices.items()):
        ax.imshow(matrix.to_numpy(float), cmap="RdBu", vmin=-1, vmax=1)
        for (i, j), v in np.ndenumerate(matrix.to_numpy(float)):
            ax.text(j, i, "—" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if abs(v) > 0.6 else "black")
        ax.set_xticks(range(size), matrix.columns, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(size), matrix.index, fontsize=7)
        ax.set_title(model, fontsize=9)
    fig.suptitle("Spearman ρ between method rankings of the summaries", fontsize=9)
    _save(fig, path)


def seed_sufficiency_plot(sufficiency: pd.DataFrame, path: str | os.PathLike) -> None:
    """PNG: winner agreement and mean Spearman ρ with the all-seed ranking against the number of seeds, one line per
    model (from a `seed_sufficiency` table)."""
    if sufficiency.empty:  # a one-seed pilot: no subset of seeds to compare with the whole
        fig, (ax,) = _panels(1, 5.0, 1.5, left=0.2, bottom=0.2)
        ax.set_axis_off()
        ax.text(0.5, 0.5, "Seed sufficiency needs a model with at least 2 seeds of 2 methods;\nthis study has none",
                ha="center", va="center", fontsize=9)
        _save(fig, path)
        return
    fig, (left, right) = _panels(2, 5.0, 3.8, ncols=2, left=1.0, bottom=0.7)
    for i, (model, block) in enumerate(sufficiency.groupby("model", sort=False)):
        style = dict(marker="o", color=f"C{i % 10}", linestyle=("-", "--", ":")[i // 10 % 3], label=model)
        left.plot(block["n_seeds"], block["winner_agreement"], **style)
        right.plot(block["n_seeds"], block["mean_spearman"], **style)
    left.set(xlabel="seeds in the subset", ylabel="winner matches all-seed winner", ylim=(-0.02, 1.02))
    right.set(xlabel="seeds in the subset", ylabel="mean Spearman ρ with all-seed ranking", ylim=(-1.02, 1.02))
    for ax in (left, right):
        ax.xaxis.get_major_locator().set_params(integer=True)
    right.legend(fontsize=6, loc="lower right")
    fig.suptitle(f"Seed sufficiency ({sufficiency['metric'].iloc[0]})", fontsize=9)
    _save(fig, path)


CURVE_METRICS = ("mean_reward", "kept_fraction")


def training_curves(runs: pd.DataFrame, window: int = 10) -> pd.DataFrame:
    """Per (model, method, step): the trailing rolling mean (`window` steps, fewer at the start) of each run's
    CURVE_METRICS, then across the method's seeds their mean and min–max band.

    `runs` holds the runs' per-step metrics stacked, with columns model, method, seed, step and CURVE_METRICS. Returns
    model, method, step, n_seeds and, per metric, "<metric>", "<metric>_low", "<metric>_high".
    """
    if window < 1:
        raise ValueError("window must be at least 1 step")
    missing = [c for c in ("model", "method", "seed", "step", *CURVE_METRICS) if c not in runs.columns]
    if missing:
        raise ValueError(f"run metrics lack columns {missing}")
    if runs.empty:
        raise ValueError("no run metrics to plot")
    if runs.duplicated(["model", "method", "seed", "step"]).any():
        raise ValueError("a (model, method, seed, step) repeats in the run metrics")
    ordered = runs.sort_values(["model", "method", "seed", "step"], kind="stable")
    smooth = ordered.groupby(["model", "method", "seed"], sort=False)[list(CURVE_METRICS)].transform(
        lambda s: s.rolling(window, min_periods=1).mean())
    smoothed = ordered[["model", "method", "seed", "step"]].join(smooth)
    grouped = smoothed.groupby(["model", "method", "step"], sort=False)
    out = grouped["seed"].nunique().rename("n_seeds").to_frame()
    for metric in CURVE_METRICS:
        out[metric] = grouped[metric].mean()
        out[f"{metric}_low"] = grouped[metric].min()
        out[f"{metric}_high"] = grouped[metric].max()
    # Methods in the order they first appear in `runs` (the config's order), steps ascending.
    order = {key: i for i, key in enumerate(pd.unique(pd.Series(list(zip(runs["model"], runs["method"])))))}
    out = out.reset_index()
    out["_order"] = [order[(m, t)] for m, t in zip(out["model"], out["method"])]
    return out.sort_values(["_order", "step"], kind="stable").drop(columns="_order").reset_index(drop=True)


def training_curves_plot(curves: pd.DataFrame, path: str | os.PathLike, window: int) -> None:
    """PNG: per model (one row each), the rolling mean reward per method with its min–max band over seeds (left) and
    the kept fraction of the sampled prompts (right), from a `training_curves` table."""
    if curves.empty:
        raise ValueError("nothing to plot: the training-curve table is empty")
    models = list(pd.unique(curves["model"]))
    fig, axes = _panels(2 * len(models), 5.0, 3.6, ncols=2, left=0.9, bottom=0.7)
    for row, model in enumerate(models):
        reward_ax, kept_ax = axes[2 * row], axes[2 * row + 1]
        block = curves[curves["model"] == model]
        for i, (method, line) in enumerate(block.groupby("method", sort=False)):
            style = dict(color=f"C{i % 10}", linestyle=("-", "--", ":")[i // 10 % 3])
            seeds = int(line["n_seeds"].max())
            reward_ax.plot(line["step"], line["mean_reward"], label=f"{method} ({seeds} seeds)", **style)
            reward_ax.fill_between(line["step"], line["mean_reward_low"], line["mean_reward_high"], alpha=0.2,
                                   color=style["color"], linewidth=0)
            kept_ax.plot(line["step"], line["kept_fraction"], label=method, **style)
        reward_ax.set(xlabel="step", ylabel=f"mean reward (rolling {window})", title=model)
        kept_ax.set(xlabel="step", ylabel=f"kept fraction (rolling {window})", ylim=(-0.02, 1.02), title=model)
        reward_ax.legend(fontsize=6, loc="best")
    fig.suptitle("Training curves: mean over seeds, band = min–max over seeds", fontsize=9)
    _save(fig, path)


def performance_profile_plot(profiles: pd.DataFrame, path: str | os.PathLike, confidence: float) -> None:
    """PNG: per model, each method's performance profile — the share of its (seed, benchmark) scores above τ, a step
    function held from each τ of the table to the next — with its `confidence` stratified bootstrap band where the
    table has one (dataflex_rl.stats.aggregates.performance_profiles)."""
    if profiles.empty:
        raise ValueError("nothing to plot: no performance profiles")
    models = list(pd.unique(profiles["model"]))
    fig, axes = _panels(len(models), 4.6, 3.4, ncols=4, left=0.8, bottom=0.7)
    for ax, model in zip(axes, models):
        for i, (method, line) in enumerate(profiles[profiles["model"] == model].groupby("method", sort=False)):
            style = dict(color=f"C{i % 10}", linestyle=("-", "--", ":")[i // 10 % 3])
            ax.plot(line["tau"], line["share"], label=method, linewidth=1, drawstyle="steps-post", **style)
            if line["low"].notna().all():
                ax.fill_between(line["tau"], line["low"], line["high"], step="post", alpha=0.15, color=style["color"],
                                linewidth=0)
        ax.set(xlabel="τ (points)", ylabel="share of scores > τ", xlim=(0, 100), ylim=(-0.02, 1.02))
        ax.set_title(model, fontsize=8)
        ax.legend(fontsize=6, loc="upper right")
    fig.suptitle(f"Performance profiles: share of (seed, benchmark) scores > τ\n"
                 f"band: {confidence:.0%} stratified bootstrap", fontsize=8)
    _save(fig, path)
