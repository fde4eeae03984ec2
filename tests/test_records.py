import pandas as pd
import pytest

from dataflex_rl.records import RECORD_COLUMNS, records_frame, summarise_items, validate_records


def _items(correct, lengths, parsed, responses="answer"):
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(len(correct))], "response": responses,
                         "length": lengths, "correct": correct, "parsed": parsed})


def test_summarise_items_counts():
    row = summarise_items(_items([1, 0, 1, 1], [10, 20, 30, 40], [True, True, False, True], ["a", "bb", "ccc", ""]),
                          model="tiny",
                          method="difffilter", seed=3, benchmark="gsm8k", domain="math", steps=300)
    assert row == {"model": "tiny", "method": "difffilter", "seed": 3, "run_id": "tiny/difffilter/seed3",
                   "benchmark": "gsm8k", "domain": "math", "n": 4, "correct": 3, "score": 0.75,
                   "mean_length": 25.0, "mean_chars": 1.5, "parse_rate": 0.75, "parse_flagged": None, "steps": 300, "config_hash": None,
                   "package_versions": None}
    assert set(row) == set(RECORD_COLUMNS)


def test_untrained_base_has_no_seed():
    row = summarise_items(_items([True, False], [1, 1], [True, True]), model="tiny", method="untrained",
                          seed=None, benchmark="gsm8k", domain="math", steps=0)
    frame = records_frame([row])
    assert row["run_id"] == "tiny/untrained"
    assert frame["seed"].dtype == "Int64" and frame["seed"].isna().all()
    with pytest.raises(ValueError, match="seed"):
        summarise_items(_items([1], [1], [True]), model="tiny", method="baseline", seed=None, benchmark="b",
                        domain="math", steps=1)


def test_summarise_items_refuses_bad_files():
    with pytest.raises(ValueError, match="response"):
        summarise_items(_items([1], [1], [True]).drop(columns="response"), model="t", method="baseline", seed=0,
                        benchmark="b", domain="math", steps=1)
    doubled = pd.concat([_items([1], [1], [True])] * 2)
    with pytest.raises(ValueError, match="more than once"):
        summarise_items(doubled, model="t", method="baseline", seed=0, benchmark="b", domain="math", steps=1)


def _valid():
    return records_frame([summarise_items(_items([1, 0], [3, 5], [True, True]), model="t", method="baseline",
                                          seed=s, benchmark="b", domain="math", steps=10) for s in (0, 1)])


def test_validate_names_missing_columns():
    with pytest.raises(ValueError, match=r"\['domain', 'steps'\]"):
        validate_records(_valid().drop(columns=["domain", "steps"]))


@pytest.mark.parametrize("column, value, message", [
    ("score", 0.9, "score must equal correct / n"),
    ("correct", 5, "correct must lie in"),
    ("parse_rate", 1.5, "parse_rate"),
    ("run_id", "t/baseline/seed9", "run_id"),
    ("seed", pd.NA, "seed must be missing exactly"),
])
def test_validate_names_bad_values(column, value, message):
    records = _valid()
    records.loc[0, column] = value
    with pytest.raises(ValueError, match=message):
        validate_records(records)


def test_validate_refuses_repeated_cells():
    records = _valid()
    with pytest.raises(ValueError, match="repeats"):
        validate_records(pd.concat([records, records.iloc[[0]]], ignore_index=True))
