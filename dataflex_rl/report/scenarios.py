"""The seed paper's scenario tables (GradAlign: Tables 1, 2 and 4, the low-utility scenario and the two ablations) from
the study's own runs: one table per campaign that trains a prompt selection, its methods as rows, the best marked.

Per (cell, method): the seeds, the test score (points, the mean over seeds of the cell's headline summary, or of its
target domain's score for an unbalanced pool: `run_summaries`), and the kept set's share of the regime's label at the
first and the last round (the corrupted prompts of noisy rewards, the target domain of an unbalanced pool, the easy
prompts of a low-utility pool: `selection_composition`, means over seeds). A campaign whose methods differ in their
validation-set size |P_v| (Table 4) shows it. Best, per cell: the highest test score; the lowest corrupted or easy
share, the highest target share. Unfiltered GRPO keeps no set: its shares are missing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

# A regime transform's label in the round metrics, and whether the best kept set holds the least or the most of it.
LABELS = {"noisy_rewards": ("corrupted", "min"), "unbalanced": ("target", "max"), "low_utility": ("easy", "min")}
HEADLINE_PREFIX = "DB-"


@dataclass(frozen=True)
class ScenarioTable:
    """What one campaign's table shows: its cells and methods (in the config's order), the score column of each cell
    (None: the headline), each cell's regime label, and each method's |P_v| where the methods differ in it."""

    name: str
    cells: tuple[str, ...]
    methods: tuple[str, ...]
    metrics: Mapping[str, str | None]
    labels: Mapping[str, str | None]
    validation_sizes: Mapping[str, int]

    def to_json(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value
                for key, value in asdict(self).items()}


def scenario_specs(study) -> list[ScenarioTable]:
    """One table per campaign of `study` (dataflex_rl.study.resolved.Study) that trains a prompt-selection method."""
    specs = []
    for campaign in study.campaigns:
        if campaign.name is None or not any(study.methods[m].family.tables for m in campaign.methods):
            continue
        cells = campaign.cells()
        regimes = {cell.name: study.regimes[cell.regime] if cell.regime else None for cell in cells}
        sizes = {m: study.methods[m].resolved_params().get("validation_size") for m in campaign.methods
                 if study.methods[m].family.tables}
        varying = len({size for size in sizes.values() if size is not None}) > 1
        specs.append(ScenarioTable(
            name=campaign.name, cells=tuple(cell.name for cell in cells), methods=campaign.methods,
            metrics={name: f"domain:{regime.evaluation_domain}" if regime and regime.evaluation_domain else None
                     for name, regime in regimes.items()},
            labels={name: LABELS[regime.transform][0] if regime and regime.transform in LABELS else None
                    for name, regime in regimes.items()},
            validation_sizes={m: size for m, size in sizes.items() if size is not None} if varying else {}))
    return specs


def _headline(summaries: pd.DataFrame) -> str:
    return next(c for c in summaries.columns if c.startswith(HEADLINE_PREFIX))


def scenario_table(summaries: pd.DataFrame, composition: pd.DataFrame, spec: ScenarioTable
                   ) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """The table of `spec` from the study's `run_summaries` and `selection_composition`, and its best cells (column ->
    row positions, for dataflex_rl.report.tables.write_table's `bold`)."""
    rows = []
    for cell in spec.cells:
        metric = spec.metrics[cell] or _headline(summaries)
        label = spec.labels[cell]
        for method in spec.methods:
            runs = summaries[(summaries["model"] == cell) & (summaries["method"] == method)]
            row = {"model": cell, "method": method}
            if spec.validation_sizes:
                row["validation_size"] = spec.validation_sizes.get(method)
            row.update({"seeds": runs["seed"].nunique(), "test_metric": metric,
                        "test_score": 100 * runs[metric].mean()})
            if label:
                for which in ("first", "last"):
                    kept = composition[(composition["model"] == cell) & (composition["method"] == method)
                                       & (composition["round"] == which)]
                    row[f"{label}_{which}_pct"] = float(kept[f"kept_{label}_pct"].iloc[0]) if len(kept) else float("nan")
            rows.append(row)
    table = pd.DataFrame(rows)
    return table, best_cells(table, spec)


def best_cells(table: pd.DataFrame, spec: ScenarioTable) -> dict[str, list[int]]:
    """Per column, the row positions holding each cell's best value (ties all marked; missing values never)."""
    best: dict[str, list[int]] = {}
    for cell in spec.cells:
        rows = table.reset_index(drop=True)
        in_cell = rows.index[rows["model"] == cell]
        columns = {"test_score": "max"}
        label = spec.labels[cell]
        if label:
            direction = dict(LABELS.values())[label]
            columns.update({f"{label}_first_pct": direction, f"{label}_last_pct": direction})
        for column, direction in columns.items():
            values = rows.loc[in_cell, column].dropna()
            if values.empty:
                continue
            target = values.max() if direction == "max" else values.min()
            best.setdefault(column, []).extend(int(i) for i in values.index[values == target])
    return best


def scenario_tables(summaries: pd.DataFrame, composition: pd.DataFrame, specs: Sequence[Mapping[str, Any]]
                    ) -> dict[str, tuple[pd.DataFrame, dict[str, list[int]]]]:
    """Every table of `specs` (ScenarioTable.to_json, as the rule passes them), by table name."""
    return {spec["name"]: scenario_table(summaries, composition, ScenarioTable(
        name=spec["name"], cells=tuple(spec["cells"]), methods=tuple(spec["methods"]), metrics=spec["metrics"],
        labels=spec["labels"], validation_sizes=spec["validation_sizes"])) for spec in specs}
