"""The seed paper's scenario tables (dataflex_rl.report.scenarios) on small hand-made frames with hand-computed cells,
and which campaigns of the shipped GradAlign campaign get one."""
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dataflex_rl.report.scenario_specs import ScenarioTable, scenario_specs
from dataflex_rl.report.scenarios import scenario_table, scenario_tables
from dataflex_rl.report.tables import write_table
from dataflex_rl.study.resolved import Study

REPO = Path(__file__).resolve().parents[1]


def _summaries():
    """Two seeds of three methods in one noisy cell, and two methods in an unbalanced cell (scores in [0, 1])."""
    rows = [("noisy", "baseline", 1, 0.10, 0.50), ("noisy", "baseline", 2, 0.20, 0.50),
            ("noisy", "gradalign", 1, 0.30, 0.10), ("noisy", "gradalign", 2, 0.40, 0.30),
            ("noisy", "random", 1, 0.25, 0.20), ("noisy", "random", 2, 0.15, 0.20),
            ("pool", "gradalign", 1, 0.60, 0.40), ("pool", "random", 1, 0.10, 0.80)]
    return pd.DataFrame(rows, columns=["model", "method", "seed", "DB-12", "domain:science"])


def _composition():
    """The kept set's shares (%) at the first and the last round, as selection_composition writes them."""
    rows = [("noisy", "gradalign", "first", 40.0, math.nan), ("noisy", "gradalign", "last", 20.0, math.nan),
            ("noisy", "random", "first", 50.0, math.nan), ("noisy", "random", "last", 20.0, math.nan),
            ("noisy", "gradalign", "3", 99.0, math.nan),
            ("pool", "gradalign", "first", math.nan, 30.0), ("pool", "gradalign", "last", math.nan, 60.0),
            ("pool", "random", "first", math.nan, 10.0), ("pool", "random", "last", math.nan, 12.0)]
    return pd.DataFrame(rows, columns=["model", "method", "round", "kept_corrupted_pct", "kept_target_pct"])


NOISY = ScenarioTable("noisy_rewards", ("noisy",), ("baseline", "gradalign", "random"), {"noisy": None},
                      {"noisy": "corrupted"}, {})


def test_table_1_has_the_mean_test_score_and_the_first_and_last_corrupted_share_per_method():
    table, best = scenario_table(_summaries(), _composition(), NOISY)
    assert list(table.columns) == ["model", "method", "seeds", "test_metric", "test_score", "corrupted_first_pct",
                                   "corrupted_last_pct"]
    assert table["method"].tolist() == ["baseline", "gradalign", "random"]
    assert table["test_metric"].tolist() == ["DB-12"] * 3  # the headline summary
    # means over the two seeds, in points: (0.1 + 0.2) / 2, (0.3 + 0.4) / 2, (0.25 + 0.15) / 2
    assert table["test_score"].tolist() == pytest.approx([15.0, 35.0, 20.0])
    assert table["seeds"].tolist() == [2, 2, 2]
    # unfiltered GRPO keeps no set; round "3" is not the first or the last
    assert math.isnan(table.loc[0, "corrupted_first_pct"])
    assert table.loc[1:, "corrupted_first_pct"].tolist() == [40.0, 50.0]
    assert table.loc[1:, "corrupted_last_pct"].tolist() == [20.0, 20.0]
    # best: the highest score (gradalign), the lowest corrupted share, ties both marked
    assert best == {"test_score": [1], "corrupted_first_pct": [1], "corrupted_last_pct": [1, 2]}


def test_an_unbalanced_cell_is_scored_on_its_target_domain_and_the_highest_target_share_is_best():
    spec = ScenarioTable("unbalanced_pool", ("pool",), ("gradalign", "random"), {"pool": "domain:science"},
                         {"pool": "target"}, {})
    table, best = scenario_table(_summaries(), _composition(), spec)
    assert table["test_metric"].tolist() == ["domain:science", "domain:science"]
    assert table["test_score"].tolist() == pytest.approx([40.0, 80.0])
    assert table["target_first_pct"].tolist() == [30.0, 10.0]
    assert best == {"test_score": [1], "target_first_pct": [0], "target_last_pct": [0]}


def test_a_campaign_varying_the_validation_size_shows_it_and_marks_the_best_per_cell():
    spec = {"name": "validation_size", "cells": ["noisy", "pool"], "methods": ["gradalign", "random"],
            "metrics": {"noisy": None, "pool": None}, "labels": {"noisy": None, "pool": None},
            "validation_sizes": {"gradalign": 10}, "splits": {}}
    table, best = scenario_tables(_summaries(), _composition(), [spec])["validation_size"]
    assert list(table.columns) == ["model", "method", "validation_size", "seeds", "test_metric", "test_score"]
    assert table["validation_size"].tolist()[0] == 10 and math.isnan(table["validation_size"].tolist()[1])
    # per cell: noisy's best is gradalign (row 0: 35 against 20), pool's is gradalign (row 2: 60 against 10)
    assert best == {"test_score": [0, 2]}


def test_table_3_scores_the_split_benchmark_on_its_validation_and_its_test_items_apart(tmp_path):
    """gcd's 8 items split by one draw of 3: each run's score file solves a chosen number of the validation and of the
    test items, so each column's mean over seeds is known by hand."""
    from dataflex_rl.prompt_selection.benchmark_split import validation_item_ids

    ids = [f"gcd-{i}" for i in range(8)]
    pd.DataFrame({"id": ids}).to_parquet(tmp_path / "gcd.parquet")
    held_out = validation_item_ids("gcd", ids, [[3, 0]])
    validation, test = [i for i in ids if i in held_out], [i for i in ids if i not in held_out]
    assert len(validation) == 3 and len(test) == 5
    solved = {("gradalign", 1): (3, 1), ("gradalign", 2): (2, 2), ("random", 1): (0, 5), ("random", 2): (1, 4)}
    scores = []
    for (method, seed), (on_validation, on_test) in solved.items():
        correct = set(validation[:on_validation]) | set(test[:on_test])
        path = tmp_path / f"{method}{seed}.parquet"
        pd.DataFrame({"prompt_id": ids, "correct": [int(i in correct) for i in ids]}).to_parquet(path)
        scores.append(["noisy", method, seed, str(path)])
    spec = ScenarioTable("held_out_split", ("noisy",), ("gradalign", "random"), {"noisy": None}, {"noisy": None}, {},
                         {"gcd": {"items": str(tmp_path / "gcd.parquet"), "draws": [[3, 0]], "scores": scores}})
    table, best = scenario_table(_summaries(), _composition(), spec)
    assert list(table.columns) == ["model", "method", "seeds", "test_metric", "test_score", "gcd_validation",
                                   "gcd_test"]
    # gradalign: validation (3/3 + 2/3) / 2 = 5/6, test (1/5 + 2/5) / 2 = 3/10; random: 1/6 and 9/10
    assert table["gcd_validation"].tolist() == pytest.approx([100 * 5 / 6, 100 / 6])
    assert table["gcd_test"].tolist() == pytest.approx([30.0, 90.0])
    assert best == {"test_score": [0], "gcd_validation": [0], "gcd_test": [1]}


def test_the_markdown_marks_the_best_cells_in_bold_and_the_csv_keeps_the_numbers(tmp_path):
    table, best = scenario_table(_summaries(), _composition(), NOISY)
    write_table(table, tmp_path / "scenario", bold=best)
    lines = (tmp_path / "scenario.md").read_text(encoding="utf-8").splitlines()
    assert lines[3] == "| noisy | gradalign | 2 | DB-12 | **35.00** | **40.00** | **20.00** |"
    assert lines[4] == "| noisy | random | 2 | DB-12 | 20.00 | 50.00 | **20.00** |"
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "scenario.csv"), table)


def test_the_gradalign_campaign_has_a_table_per_scenario_and_ablation():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    overlay = yaml.safe_load((REPO / "config/campaigns/gradalign.yaml").read_text())
    config = {**config, **{k: v for k, v in overlay.items() if k != "models"},
              "models": {**config["models"], **overlay["models"]}}
    specs = {spec.name: spec for spec in scenario_specs(Study.from_config(config))}
    assert list(specs) == ["noisy_rewards", "unbalanced_pool", "low_utility", "validation_split", "validation_size",
                           "similarity_ablation", "validation_ablation"]
    # Table 3: gcd's validation split, from gradalign_gcd's draw, scored apart for all 6 methods × 3 seeds
    split = specs["validation_split"].splits
    assert list(split) == ["gcd"] and split["gcd"]["draws"] == [[32, 0]]
    assert len(split["gcd"]["scores"]) == 6 * 3
    assert all(path.endswith("/gcd.parquet") for *_, path in split["gcd"]["scores"])
    assert specs["noisy_rewards"].splits == {}
    assert specs["noisy_rewards"].labels == {"tiny-qwen2@noisy_rewards:noisy50": "corrupted"}
    assert specs["unbalanced_pool"].metrics == {"tiny-qwen2@unbalanced_pool:science_unbalanced": "domain:science"}
    assert specs["low_utility"].labels == {"tiny-qwen2-s3@low_utility:easy20": "easy"}
    # every prompt selection holds |P_v| prompts out of its pool, the baselines the default 32
    assert specs["validation_size"].validation_sizes == {"gradalign_val10": 10, "gradalign_val30": 30,
                                                          "gradalign_val100": 100, "random": 32, "accgreedy": 32,
                                                          "align": 32}
    assert specs["noisy_rewards"].validation_sizes == {}  # one size: no column


def test_a_study_without_a_prompt_selection_has_no_scenario_table():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert scenario_specs(Study.from_config(config)) == []
