"""The parse gate reads the untrained base model's scores: a benchmark whose answers it cannot parse stops training."""
import pandas as pd
import pytest

from dataflex_rl.verify.parse_gate import ParseGateError, base_parse_report, check_base_parse_rates


def _scores(parsed):
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(len(parsed))], "length": 3, "correct": False,
                         "parsed": parsed, "response": [f"r{i}" if p else f"rambling {i}" for i, p in enumerate(parsed)]})


def test_report_counts_parse_rates_and_keeps_unparsed_examples():
    report = base_parse_report("m", {"a": _scores([True, True, False, True]), "b": _scores([False] * 5)}, 0.5)
    assert report["benchmarks"]["a"] == {"items": 4, "parsed": 3, "parse_rate": 0.75, "passed": True,
                                         "unparsed_examples": ["rambling 2"]}
    assert report["benchmarks"]["b"]["unparsed_examples"] == ["rambling 0", "rambling 1", "rambling 2"]
    assert report["failed"] == ["b"]


def test_gate_fails_naming_benchmark_rate_and_fix():
    with pytest.raises(ParseGateError, match=r"model 'm'.*\n  b: parse rate 0\.250 \(1 of 4\).*rambling") as info:
        check_base_parse_rates("m", {"a": _scores([True] * 4), "b": _scores([True, False, False, False])}, 0.3)
    assert "calibration.min_base_parse_rate" in str(info.value) and "\n  a:" not in str(info.value)


def test_rate_equal_to_the_threshold_passes_and_zero_threshold_passes_everything():
    assert check_base_parse_rates("m", {"a": _scores([True, False])}, 0.5)["failed"] == []
    assert check_base_parse_rates("m", {"a": _scores([False, False])}, 0.0)["failed"] == []
