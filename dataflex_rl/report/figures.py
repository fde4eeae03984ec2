"""Figures. Built on a bare matplotlib Figure with the Agg canvas, so no pyplot state or display is involved."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dataflex_rl.atomic import atomic_path


def forest_plot(comparison_df: pd.DataFrame, path: str | os.PathLike, metric: str) -> None:
    """PNG of each method's paired Δ versus its control with its CI, from a `compare_methods` table (points).

    A vertical line marks Δ = 0, so an interval that excludes it is visible at a glance. A method whose CI is NaN
    (fewer than two seeds) is drawn as a point without a bar.
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

    fig = Figure(figsize=(6.0, 1.0 + 0.35 * len(df)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.axvline(0.0, color="0.5", linewidth=1, linestyle="--")
    ax.errorbar(delta, y, xerr=errors, fmt="o", color="C0", ecolor="C0", capsize=3)
    ax.set_yticks(y, labels)
    ax.set_xlabel(f"Δ {metric} vs control (percentage points, paired t CI)")
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=150)
