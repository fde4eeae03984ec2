"""Result tables: every table is written as CSV for machines and as a Markdown pipe table for people, and on request as
a LaTeX table body (rows only, to \\input inside the paper's own tabular).

The Markdown is rendered here rather than through pandas' `to_markdown` so that the platform does not depend on
`tabulate`, and so that a small p-value is never printed as 0.00.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from pathlib import Path

import pandas as pd

from dataflex_rl.artefacts.atomic import write_csv, write_text

MISSING = "—"


def format_cell(value, decimals: int = 2) -> str:
    """Render one cell: floats to `decimals` places, but a non-zero value that would round to zero keeps 2 significant
    digits (p-values), missing values as a dash, and pipes escaped so they cannot split a Markdown row."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, (bool, Integral)):
        return str(value)
    if isinstance(value, Real):
        x = float(value)
        if x != 0 and abs(x) < 0.5 * 10 ** -decimals:
            return f"{x:.2g}"
        return f"{x:.{decimals}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _cells(df: pd.DataFrame, decimals: int) -> list[list[str]]:
    """Every cell of `df` through `format_cell`, row by row: formatted once for both the Markdown and the LaTeX."""
    return [[format_cell(v, decimals) for v in row] for row in df.itertuples(index=False, name=None)]


def _markdown(df: pd.DataFrame, cells: list[list[str]]) -> str:
    numeric = [pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype) for dtype in df.dtypes]
    header = "| " + " | ".join(format_cell(str(c)) for c in df.columns) + " |"
    rule = "|" + "|".join("---:" if right else ":---" for right in numeric) + "|"
    body = ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join([header, rule, *body]) + "\n"


def markdown_table(df: pd.DataFrame, decimals: int = 2) -> str:
    """A Markdown pipe table of `df` (index ignored), numeric columns right-aligned."""
    return _markdown(df, _cells(df, decimals))


_LATEX_SPECIAL = str.maketrans({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                                "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                                "^": r"\textasciicircum{}"})


def latex_escape(text: str) -> str:
    return text.translate(_LATEX_SPECIAL)


def _latex_cell(text: str) -> str:
    """A Markdown-formatted cell for LaTeX: pipes unescaped, the missing mark as "--", special characters escaped."""
    return "--" if text == MISSING else latex_escape(text.replace("\\|", "|"))


def _latex(df: pd.DataFrame, cells: list[list[str]]) -> str:
    header = " & ".join(latex_escape(str(c)) for c in df.columns) + r" \\"
    body = [" & ".join(map(_latex_cell, row)) + r" \\" for row in cells]
    return "\n".join([header, r"\midrule", *body]) + "\n"


def latex_table_body(df: pd.DataFrame, decimals: int = 2) -> str:
    """The header row, a \\midrule and one row per record, cells formatted as in Markdown and escaped for LaTeX; the
    column specification and the rules around it are the paper's to choose."""
    return _latex(df, _cells(df, decimals))


def write_table(df: pd.DataFrame, stem: Path, decimals: int = 2, *, latex: bool = False) -> None:
    """Write `stem`.csv (full precision) and `stem`.md (rounded), and `stem`.tex (a LaTeX table body) when `latex`,
    each atomically; the index is not written."""
    stem = Path(stem)
    cells = _cells(df, decimals)
    write_csv(stem.with_name(stem.name + ".csv"), df)
    write_text(stem.with_name(stem.name + ".md"), _markdown(df, cells))
    if latex:
        write_text(stem.with_name(stem.name + ".tex"), _latex(df, cells))
