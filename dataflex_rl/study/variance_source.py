"""Where the power plan's variance comes from: the records table `stats.variance_from` names, read as the tables read
records (dataflex_rl.records.imported.load_records: a tidy table, or the authors' released wide CSV) and summarised as
they summarise them, so that a spread here is the `sd` a comparisons row of that file shows.

A study cell takes its spreads from the source cells that match it: the one of the same name (this study's own
records, a pilot of the same config, a campaign overlay named like the released cells), else every one of the same
model — the records' `base_model`, or their `model` where there is none, compared ignoring case, as the paper config's
`qwen2.5-7b-base` is the release's `Qwen2.5-7B-base` — on the same regime and step budget. A method pair takes its
spread from the one matched cell that has both arms; a pair no matched cell has, or several have, gets none: the plan
says so instead of borrowing another pair's or cell's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dataflex_rl.records.imported import load_records
from dataflex_rl.stats.paired import POINTS, arm_values, paired_difference_ci
from dataflex_rl.stats.parse_flags import check_exclusions, excluded_benchmarks
from dataflex_rl.stats.summaries import run_summaries, summary_columns
from dataflex_rl.study.resolved import Cell

# The run-level record columns that say what a source cell is (where the records have them).
CELL_COLUMNS = ("base_model", "regime", "steps")


@dataclass(frozen=True)
class Spread:
    """One method pair's paired differences on one summary in a source cell: shared seeds and their SD in points."""

    cell: str
    method: str
    control: str
    summary: str
    n: int
    sd: float


@dataclass(frozen=True)
class VarianceSource:
    """A records table's run summaries, with the benchmarks they average."""

    path: str
    summaries: pd.DataFrame
    benchmarks: frozenset[str]

    @classmethod
    def read(cls, path: str, workdir: Path) -> "VarianceSource":
        """The source at `path` (relative to `workdir`); a table that is not records is refused naming the key."""
        try:
            records = load_records(workdir / path)
            excluded = excluded_benchmarks(records)
            check_exclusions(records, excluded)
            summaries = run_summaries(records, extra_keys=[c for c in CELL_COLUMNS if c in records.columns],
                                      excluded=excluded)
        except ValueError as error:
            raise ValueError(f"stats.variance_from: {path!r} is not a records table the tables could read ({error}); "
                             f"name the released run table, a pilot study's records or this study's "
                             f"results/records/records.parquet, or remove the key") from error
        return cls(path, summaries, frozenset(records["benchmark"]))

    @property
    def summary_names(self) -> list[str]:
        return summary_columns(self.summaries)

    def matching_cells(self, cell: Cell, steps: int) -> list[str]:
        """The source cells `cell` (of `steps` steps) takes its spreads from (module docstring), in file order."""
        frame = self.summaries
        names = list(pd.unique(frame["model"]))
        if cell.name in names:
            return [cell.name]
        model = frame["base_model"] if "base_model" in frame else frame["model"]
        regime = frame["regime"].fillna("") if "regime" in frame else pd.Series("", index=frame.index)
        same = (model.str.lower() == cell.model.lower()) & (regime == (cell.regime or ""))
        if "steps" in frame:
            same &= frame["steps"].eq(steps).fillna(False).astype(bool)
        return list(pd.unique(frame.loc[same, "model"]))

    def cells_with(self, cells: list[str], method: str, control: str) -> list[str]:
        """The cells of `cells` with runs of both arms of a pair: the pair takes a spread only where there is one."""
        frame = self.summaries
        return [name for name in cells if {method, control} <= set(frame.loc[frame["model"] == name, "method"])]

    def spreads(self, cell: str, method: str, control: str) -> list[Spread]:
        """Per summary, the SD of the pair's paired differences over the seeds both arms have in `cell`."""
        runs = self.summaries[self.summaries["model"] == cell]
        out = []
        for summary in self.summary_names:
            diff = paired_difference_ci(arm_values(runs, method, summary), arm_values(runs, control, summary),
                                        allow_unpaired=True)
            out.append(Spread(cell, method, control, summary, diff.n, POINTS * diff.sd))
        return out
