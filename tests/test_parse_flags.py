"""Parse-rate flags: every flag reported; a benchmark no trained run of a model can be parsed on is left out of that
model's summaries instead of being averaged in as a low score."""
import pandas as pd
import pytest

from dataflex_rl.records.run_records import records_frame, summarise_items
from dataflex_rl.stats.parse_flags import (EXCLUDED, KEPT_BASE, KEPT_RUN, check_exclusions, excluded_benchmarks,
                                           parse_flag_table)
from dataflex_rl.stats.summaries import run_summaries

LAYOUT = [("m1", "math", 10), ("m2", "math", 10), ("l1", "logic", 10), ("s1", "science", 10)]


def _records(parsed: dict, correct: dict | None = None, min_parse_rate=0.5):
    """parsed / correct: (method, seed, benchmark) → items parsed / solved out of 10 (default 10 / 5)."""
    rows = []
    for method, seed in (("untrained", None), ("baseline", 1), ("baseline", 2), ("topk", 1), ("topk", 2)):
        for bench, domain, n in LAYOUT:
            k_parsed = parsed.get((method, seed, bench), n)
            k_correct = (correct or {}).get((method, seed, bench), min(5, k_parsed))
            items = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(n)], "response": "x", "length": 3,
                                  "correct": [i < k_correct for i in range(n)],
                                  "parsed": [i < k_parsed for i in range(n)]})
            rows.append(summarise_items(items, model="m", method=method, seed=seed, benchmark=bench, domain=domain,
                                        steps=0 if seed is None else 10, min_parse_rate=min_parse_rate))
    return records_frame(rows)


def test_records_flag_parse_rates_below_the_threshold():
    records = _records({("topk", 1, "m1"): 4, ("topk", 2, "m1"): 5})
    flagged = records.set_index(["run_id", "benchmark"])["parse_flagged"]
    assert flagged[("m/topk/seed1", "m1")] and not flagged[("m/topk/seed2", "m1")]   # 0.4 < 0.5 ≤ 0.5
    assert flagged.sum() == 1
    assert records_frame([{**records.iloc[0].to_dict(), "parse_flagged": None}])["parse_flagged"].isna().all()


def test_a_benchmark_flagged_in_every_trained_run_is_left_out_of_the_models_summaries():
    unparsed = {(method, seed, "m2"): 0 for method in ("baseline", "topk") for seed in (1, 2)}
    records = _records({**unparsed, ("untrained", None, "s1"): 1, ("topk", 1, "l1"): 2},
                       correct={("baseline", 1, "m1"): 9})
    excluded = excluded_benchmarks(records)
    assert excluded == {"m": ["m2"]}
    check_exclusions(records, excluded)
    summaries = run_summaries(records, excluded=excluded)
    run = summaries.set_index("run_id").loc["m/baseline/seed1"]
    assert run["excluded_benchmarks"] == "m2"
    # Math is m1 alone: 0.9; DB = (0.9 + 0.5 + 0.5) / 3, still named after the study's 4 benchmarks.
    assert run["domain:math"] == pytest.approx(0.9) and run["DB-4"] == pytest.approx(1.9 / 3)
    assert run["Item-4"] == pytest.approx((9 + 5 + 5) / 30)
    table = parse_flag_table(records, excluded)
    actions = {(r.run_id, r.benchmark): r.action for r in table.itertuples()}
    assert actions[("m/untrained", "s1")] == KEPT_BASE
    assert actions[("m/topk/seed1", "l1")] == KEPT_RUN
    assert actions[("m/topk/seed2", "m2")] == EXCLUDED and len(table) == 6
    assert table.loc[table["benchmark"] == "s1", "parse_rate"].tolist() == [0.1]


def test_flags_in_the_untrained_base_alone_exclude_nothing():
    records = _records({("untrained", None, "s1"): 0})
    assert excluded_benchmarks(records) == {}
    assert run_summaries(records)["excluded_benchmarks"].eq("").all()


def test_a_domain_with_every_benchmark_excluded_is_refused_naming_the_fix():
    unparsed = {(method, seed, "s1"): 1 for method in ("baseline", "topk") for seed in (1, 2)}
    records = _records(unparsed)
    with pytest.raises(ValueError, match=r"m: every benchmark of domain\(s\) \['science'\].*evaluation.min_parse_rate"):
        check_exclusions(records, excluded_benchmarks(records))


def test_unknown_flags_exclude_nothing():
    records = _records({}).assign(parse_flagged=pd.array([pd.NA] * 20, dtype="boolean"))
    assert excluded_benchmarks(records) == {} and parse_flag_table(records, {}).empty
