"""The seed paper's scenario tables (GradAlign: Tables 1, 2 and 4, the low-utility scenario and the two ablations) from
the study's own runs: one table per campaign that trains a prompt selection, its methods as rows, the best marked.

Per (cell, method): the seeds, the test score (points, the mean over seeds of the cell's headline summary, or of its
target domain's score for an unbalanced pool: `run_summaries`), and the kept set's share of the regime's label at the
first and the last round (the corrupted prompts of noisy rewards, the target domain of an unbalanced pool, the easy
prompts of a low-utility pool: `selection_composition`, means over seeds). A campaign whose methods differ in their
validation-set size |P_v| (Table 4) shows it; one whose methods draw their validation prompts from a benchmark
(Table 3) shows the score on that benchmark's validation items and on its test items, means over seeds. Best, per
cell: the highest scores; the lowest corrupted or easy share, the highest target share. Unfiltered GRPO keeps no set:
its shares are missing.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from dataflex_rl.records.run_records import held_out_items
from dataflex_rl.report.scenario_specs import LABELS, ScenarioTable

HEADLINE_PREFIX = "DB-"


def _headline(summaries: pd.DataFrame) -> str:
    return next(c for c in summaries.columns if c.startswith(HEADLINE_PREFIX))


def split_scores(splits: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Per (cell, method, seed, benchmark) of ScenarioTable.splits: the run's score (points) on the benchmark's
    validation items and on its test items (prompt_selection.benchmark_split), from its score file."""
    rows = []
    for benchmark, split in splits.items():
        held_out = held_out_items(benchmark, split)
        for cell, method, seed, path in split["scores"]:
            scored = pd.read_parquet(path, columns=["prompt_id", "correct"])
            validation = scored["prompt_id"].astype(str).isin(held_out)
            rows.append({"cell": cell, "method": method, "seed": seed, "benchmark": benchmark,
                         "validation": 100 * scored.loc[validation, "correct"].astype(float).mean(),
                         "test": 100 * scored.loc[~validation, "correct"].astype(float).mean()})
    return pd.DataFrame(rows, columns=["cell", "method", "seed", "benchmark", "validation", "test"])


def scenario_table(summaries: pd.DataFrame, composition: pd.DataFrame, spec: ScenarioTable
                   ) -> tuple[pd.DataFrame, dict[str, list[int]]]:
    """The table of `spec` from the study's `run_summaries` and `selection_composition` (and, for a benchmark split
    into validation and test items, its score files), and its best cells (column -> row positions, for
    dataflex_rl.report.tables.write_table's `bold`)."""
    splits = split_scores(spec.splits)
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
            for benchmark in spec.splits:
                scored = splits[(splits["cell"] == cell) & (splits["method"] == method)
                                & (splits["benchmark"] == benchmark)]
                row[f"{benchmark}_validation"] = scored["validation"].mean()
                row[f"{benchmark}_test"] = scored["test"].mean()
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
        columns = {"test_score": "max", **{f"{benchmark}_{split}": "max" for benchmark in spec.splits
                                           for split in ("validation", "test")}}
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
        labels=spec["labels"], validation_sizes=spec["validation_sizes"], splits=spec["splits"])) for spec in specs}
