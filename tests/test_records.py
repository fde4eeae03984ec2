import pandas as pd
import pytest

from dataflex_rl.records.run_records import RECORD_COLUMNS, records_frame, summarise_items, validate_records


def _items(correct, lengths, parsed, responses="answer"):
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(len(correct))], "response": responses,
                         "length": lengths, "correct": correct, "parsed": parsed})


def test_summarise_items_counts():
    row = summarise_items(_items([1, 0, 1, 1], [10, 20, 30, 40], [True, True, False, True], ["a", "bb", "ccc", ""]),
                          model="tiny",
                          method="difffilter", seed=3, benchmark="gsm8k", domain="math", steps=300)
    assert row == {"model": "tiny", "method": "difffilter", "seed": 3, "run_id": "tiny/difffilter/seed3",
                   "benchmark": "gsm8k", "domain": "math", "n": 4, "correct": 3, "score": 0.75,
                   "counts_inferred": False, "mean_length": 25.0, "mean_chars": 1.5, "parse_rate": 0.75,
                   "parse_flagged": None, "cut_share": pytest.approx(float("nan"), nan_ok=True), "steps": 300,
                   "fingerprint": None, "package_versions": None}
    assert set(row) == set(RECORD_COLUMNS)


def _cut_share(items, max_new_tokens):
    return summarise_items(items, model="t", method="baseline", seed=0, benchmark="b", domain="math", steps=1,
                           max_new_tokens=max_new_tokens)["cut_share"]


def test_an_embedded_answer_is_cut_when_its_length_with_end_of_text_reached_the_cap():
    """The embedded generator counts its end-of-text token in the length: with a cap of 8, lengths 3 and 7 ended
    (the answer and end-of-text fitted), lengths 8 are at the cap: 2 of 5."""
    items = _items([1, 0, 1, 0, 1], [3, 8, 7, 8, 1], [True] * 5)
    assert _cut_share(items, 8) == 2 / 5
    assert _cut_share(items, 9) == 0.0
    assert pd.isna(_cut_share(items, None))  # no cap known (no provenance setting): unknown, not 0


def test_a_vllm_answer_is_cut_when_its_finish_reason_is_length_whatever_its_length():
    """vLLM says why each answer ended; a stop-token answer of exactly max_tokens tokens is not cut."""
    items = _items([1, 0, 1, 0], [8, 8, 3, 8], [True] * 4).assign(finish_reason=["stop", "length", "stop", "length"])
    assert _cut_share(items, 8) == 2 / 4


def test_cut_shares_outside_0_1_are_refused():
    frame = _valid()
    frame.loc[0, "cut_share"] = 1.5
    with pytest.raises(ValueError, match=r"cut_share must lie in \[0, 1\] \(rows \[0\]\)"):
        validate_records(frame)


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
    ("score", 0.9, "score must equal correct / n where counts are measured"),
    ("score", 1.5, r"score must lie in \[0, 1\]"),
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


def test_validate_refuses_unknown_count_origin():
    records = _valid().astype({"counts_inferred": object})
    records.loc[0, "counts_inferred"] = None
    with pytest.raises(ValueError, match=r"counts_inferred must be true or false \(rows \[0\]\)"):
        validate_records(records)


def test_validate_refuses_repeated_cells():
    records = _valid()
    with pytest.raises(ValueError, match="repeats"):
        validate_records(pd.concat([records, records.iloc[[0]]], ignore_index=True))


def _imported(score, n, correct):
    """A record row as an importer of printed scores writes it: the score as printed, counts inferred."""
    return {**_valid().iloc[0].to_dict(), "n": n, "correct": correct, "score": score, "counts_inferred": True}


def test_inferred_counts_keep_the_printed_score():
    # 6.2 % of 272 items is 16.864, so 17 solved; the printed 0.062 stays the score (17/272 would be 0.0625).
    records = records_frame([_imported(0.062, 272, 17)])
    assert records.loc[0, "score"] == 0.062 and records.loc[0, "counts_inferred"]
    # A printed score exactly halfway between two counts admits either.
    records_frame([_imported(0.25, 2, 0)])
    with pytest.raises(ValueError, match="score must equal correct / n where counts are measured"):
        records_frame([{**_imported(0.062, 272, 17), "counts_inferred": False}])


@pytest.mark.parametrize("n, correct", [(272, 16), (272, 18), (30, 1)])
def test_inferred_counts_must_be_the_count_nearest_the_score(n, correct):
    # 0.062 · 272 = 16.864 (only 17 is nearest); 0.062 · 30 = 1.86 (2, not 1).
    with pytest.raises(ValueError, match="correct must be the count nearest score · n where counts are inferred"):
        records_frame([_imported(0.062, n, correct)])
