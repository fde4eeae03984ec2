"""Cut flags: a (run, benchmark) whose share of answers cut at the length cap is above evaluation.max_cut_share is
listed in its own table, from the records alone; nothing else in the tables changes."""
import pandas as pd

from dataflex_rl.records.run_records import records_frame, summarise_items
from dataflex_rl.report.outputs import table_paths
from dataflex_rl.report.regenerate import regenerate
from dataflex_rl.stats.cut_flags import CUT_FLAG_COLUMNS, cut_flag_table

LAYOUT = [("m1", "math"), ("l1", "logic"), ("s1", "science")]


def _records(cut: dict):
    """cut: (method, seed, benchmark) → answers of 10 at the cap of 8 (length 8, vLLM finish_reason "length"); the
    others stop at 3 tokens. 5 of 10 are solved everywhere."""
    rows = []
    for method, seed in (("untrained", None), ("baseline", 1), ("baseline", 2), ("topk", 1), ("topk", 2)):
        for bench, domain in LAYOUT:
            k = cut.get((method, seed, bench), 0)
            items = pd.DataFrame({"prompt_id": [f"p{i}" for i in range(10)], "response": "x",
                                  "length": [8 if i < k else 3 for i in range(10)],
                                  "correct": [i % 2 == 0 for i in range(10)], "parsed": True,
                                  "finish_reason": ["length" if i < k else "stop" for i in range(10)]})
            rows.append(summarise_items(items, model="m", method=method, seed=seed, benchmark=bench, domain=domain,
                                        steps=0 if seed is None else 10, max_new_tokens=8))
    return records_frame(rows)


def test_shares_above_the_setting_are_listed_with_length_and_score_and_the_setting_itself_is_not():
    records = _records({("topk", 1, "m1"): 3, ("topk", 2, "m1"): 1, ("untrained", None, "l1"): 10})
    table = cut_flag_table(records, max_cut_share=0.1)
    assert list(table.columns) == CUT_FLAG_COLUMNS
    # 0.3 and 1.0 are above 0.1; 0.1 itself is not
    assert table[["run_id", "benchmark", "cut_share"]].values.tolist() == [
        ["m/untrained", "l1", 1.0], ["m/topk/seed1", "m1", 0.3]]
    assert table["mean_length"].tolist() == [8.0, (3 * 8 + 7 * 3) / 10]
    assert table["score"].tolist() == [50.0, 50.0]
    assert cut_flag_table(records, max_cut_share=1.0).empty


def test_records_without_a_cut_share_are_never_flagged():
    records = _records({("topk", 1, "m1"): 10}).assign(cut_share=float("nan"))
    assert list(cut_flag_table(records, max_cut_share=0.0).columns) == CUT_FLAG_COLUMNS
    assert cut_flag_table(records, max_cut_share=0.0).empty


def test_the_tables_write_cut_flags_beside_the_others(tmp_path):
    records = _records({("baseline", 2, "s1"): 4})
    tables = regenerate(records, tmp_path, controls={"topk": "baseline"}, bootstrap_resamples=0, max_cut_share=0.25)
    assert {f"{tmp_path}/cut_flags.{ext}" for ext in ("csv", "md", "tex")} <= set(table_paths(tmp_path))
    written = pd.read_csv(tmp_path / "cut_flags.csv")
    assert written[["run_id", "benchmark", "cut_share"]].values.tolist() == [["m/baseline/seed2", "s1", 0.4]]
    assert tables["cut_flags"]["run_id"].tolist() == ["m/baseline/seed2"]
    assert "m/baseline/seed2" in (tmp_path / "cut_flags.md").read_text()
