"""Data validation: every bad row of a corpus or benchmark file is quarantined with its reason and counted, and a file
over its threshold fails its job naming the file, the counts, the threshold key and the quarantine file.

The unit tests build rows by hand; the workflow tests write bad data files and run the real `corpus` and
`benchmark_items` rules with Snakemake, checking the audit counts against the rows planted in each file.
"""
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dataflex_rl.artefacts.items import LETTERS, item_metadata
from dataflex_rl.item_sources.loaders import BenchmarkSizeWarning
from dataflex_rl.item_sources.readers import gpqa_order
from dataflex_rl.corpus.build import benchmark_items, build_corpus
from dataflex_rl.corpus.quarantine_gate import QuarantineGateError, check_quarantine
from dataflex_rl.corpus.validation import (FILE_ANSWER_FORMATS, REASONS, BenchmarkContentWarning, DataValidationError,
                                          FileReport, KeptRows, duplicate_items, file_problem, item_problem,
                                          keep_valid, read_jsonl, settle, text_type_problem, validated_benchmark_items)
from dataflex_rl.study.resolved import Study
from dataflex_rl.corpus.validation_settings import ValidationSettings

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
FORMATS = ("math", "multiple_choice", "exact", "knights_knaves")
MC_PROMPT = "Which is largest?\nA) 1\nB) 2\nC) 3\nD) 4"


def item(**changes):
    row = {"id": "r1", "prompt": "What is 2+3?", "answer": "5", "domain": "math", "answer_format": "math",
           "metadata": "{}"}
    return {**row, **changes}


@pytest.mark.parametrize("row", [
    item(),
    item(prompt=MC_PROMPT, answer="D", answer_format="multiple_choice"),
    item(prompt="Which?", answer="B", answer_format="multiple_choice", metadata=json.dumps({"options": [1, 2, 3]})),
    item(answer="Zoey is a knight, and Oliver is a knave", domain="logic", answer_format="knights_knaves"),
    item(answer="(A)", domain="logic", answer_format="exact"),
    item(answer="\\frac{1}{2}"),
])
def test_well_formed_rows_of_every_format_pass(row):
    assert item_problem(row, FORMATS) is None


def test_the_schema_lists_the_answer_formats_a_corpus_file_may_declare():
    """config/schema.yaml refuses at dry run what row validation would quarantine: both come from the registry."""
    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text())
    entry = schema["properties"]["corpus"]["properties"]["files"]["items"]["properties"]["answer_format"]
    assert entry["enum"] == list(FILE_ANSWER_FORMATS) == list(FORMATS)


@pytest.mark.parametrize("row,reason,detail", [
    (item(prompt="  \n"), "missing_prompt", "missing or empty"),
    (item(prompt=None), "missing_prompt", "missing or empty"),
    (item(answer=None), "missing_answer", "missing or empty"),
    (item(answer=" "), "missing_answer", "missing or empty"),
    (item(domain="biology"), "unknown_domain", "domain 'biology'; use one of math, logic, science"),
    (item(domain=None), "unknown_domain", "domain None"),
    (item(answer_format="procedural"), "unknown_answer_format", "answer_format 'procedural'"),
    (item(answer="no answer given."), "unparseable_answer", "math-verify finds no expression"),
    (item(answer="unknown\n####"), "unparseable_answer", "math-verify finds no expression"),
    (item(prompt=MC_PROMPT, answer="E", answer_format="multiple_choice"), "unparseable_answer",
     "'E' is not among the item's options A, B, C, D"),
    (item(prompt="Which?", answer="D", answer_format="multiple_choice", metadata=json.dumps({"choices": ["x", "y"]})),
     "unparseable_answer", "'D' is not among the item's options A, B"),
    (item(prompt=MC_PROMPT, answer="(B)", answer_format="multiple_choice"), "unparseable_answer",
     "bare letter 'B'"),
    (item(prompt=MC_PROMPT, answer="largest", answer_format="multiple_choice"), "unparseable_answer",
     "not an option letter"),
    (item(prompt="Pick one.", answer="A", answer_format="multiple_choice"), "unparseable_answer", "no options found"),
    (item(answer="Zoey is honest", domain="logic", answer_format="knights_knaves"), "unparseable_answer",
     "no 'X is a knight/knave' assignment"),
    (item(answer="Anna is a knight", domain="logic", answer_format="knights_knaves",
          metadata=json.dumps({"names": ["Zoey", "Oliver"]})), "unparseable_answer",
     "no 'X is a knight/knave' assignment"),
    (item(answer=" . ", answer_format="exact"), "unparseable_answer", "empty after normalisation"),
])
def test_each_bad_row_gets_its_reason(row, reason, detail):
    got_reason, got_detail = item_problem(row, FORMATS)
    assert got_reason == reason and detail in got_detail


def test_prompt_length_cap_is_optional():
    long = item(prompt="What is 2+3? " * 10)
    assert item_problem(long, FORMATS) is None
    assert item_problem(long, FORMATS, max_prompt_chars=100) == ("prompt_too_long", "130 characters > 100")


def test_duplicate_ids_and_prompts_are_quarantined_against_kept_rows():
    report = FileReport("f.jsonl")
    kept = KeptRows({"train-0"}, {"What is 1+1?"})
    rows = [(1, item(id="a")), (2, item(id="a", prompt="What is 7+1?", answer="8")), (3, item(id="train-0")),
            (4, item(id="b", prompt=" What is 1+1? ")), (5, item(id="c", prompt="What is 2+3?"))]
    report.rows_in = len(rows)
    good = keep_valid(rows, report, kept, FORMATS)
    assert [line for line, _ in good] == [1]
    assert [(r["line"], r["reason"]) for r in report.quarantined] == [
        (2, "duplicate_id"), (3, "duplicate_id"), (4, "duplicate_prompt"), (5, "duplicate_prompt")]
    assert report.summary() == {"rows_in": 5, "rows_kept": 1, "rows_quarantined": 4,
                                "quarantined_by_reason": {"duplicate_id": 2, "duplicate_prompt": 2}}


def test_jsonl_reader_quarantines_undecodable_and_malformed_lines_with_their_numbers(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b'{"prompt": "a", "answer": "1"}\n\n{"prompt": "caf\xe9", "answer": "2"}\n{"prompt": "b",\n'
                     b'[1, 2]\n{"prompt": "c", "answer": "3"}\n')
    report = FileReport(str(path))
    assert [line for line, _ in read_jsonl(path, report)] == [1, 6]
    assert report.rows_in == 5  # the blank line 2 is not a row
    assert [(r["line"], r["reason"]) for r in report.quarantined] == [
        (3, "invalid_utf8"), (4, "malformed_json"), (5, "malformed_json")]
    assert report.quarantined[0]["row"] == '{"prompt": "caf\\xe9", "answer": "2"}'


def _report(rows_in: int, bad: int) -> FileReport:
    report = FileReport("data/x.jsonl", rows_in=rows_in)
    for line in range(bad):
        report.quarantine(line + 1, "missing_answer", "the gold answer is missing or empty", {})
    return report


def test_the_audit_counts_each_file_and_the_quarantine_file_survives_a_failure(tmp_path):
    quarantine = tmp_path / "quarantine.jsonl"
    audit = settle([_report(20, 1), _report(20, 2)], str(quarantine))  # the share is the quarantine gate's to judge
    assert audit["files"]["data/x.jsonl"] == {"rows_in": 20, "rows_kept": 18, "rows_quarantined": 2,
                                              "quarantined_by_reason": {"missing_answer": 2}}
    assert audit["quarantine"] == {"path": str(quarantine), "rows": 3, "by_reason": {"missing_answer": 3}}
    with pytest.raises(DataValidationError) as failure:
        settle([_report(20, 1), _report(3, 3)], str(quarantine))
    assert str(failure.value) == (
        "data validation failed:\n  data/x.jsonl: no usable row (3 read; quarantined: missing_answer 3); "
        f"inspect {quarantine}; a row needs prompt (or question) and answer text")
    assert len(quarantine.read_text().splitlines()) == 4
    assert settle([], str(quarantine))["quarantine"]["rows"] == 0 and quarantine.read_text() == ""


def test_corpus_files_are_added_after_the_procedural_rows(tmp_path):
    path = tmp_path / "mine.jsonl"
    rows = [{"question": "What is 12*12?", "answer": 144, "level": 3},
            {"question": "Which is largest?\nA) 1\nB) 2", "answer": "B", "domain": "science",
             "answer_format": "multiple_choice"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    procedural, _ = build_corpus(["chain_sum", "syllogism"], 4, seed=0)
    corpus, audit = build_corpus(["chain_sum", "syllogism"], 4, seed=0,
                                 files=[{"path": str(path), "domain": "math", "answer_format": "math"}])
    pd.testing.assert_frame_equal(corpus.head(len(procedural)), procedural)
    added = corpus.tail(2).to_dict("records")
    assert [(r["id"], r["source"], r["domain"], r["answer"], r["answer_format"]) for r in added] == [
        (f"{path}:1", "mine", "math", "144", "math"), (f"{path}:2", "mine", "science", "B", "multiple_choice")]
    assert json.loads(added[0]["metadata"]) == {"level": 3}
    assert audit["files"][str(path)]["rows_kept"] == 2 and audit["rows"] == len(procedural) + 2


@pytest.mark.filterwarnings("ignore::dataflex_rl.item_sources.loaders.BenchmarkSizeWarning")
def test_a_benchmark_row_quarantined_after_loading_is_removed_by_position(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    rows = [{"question": q, "answer": f"#### {a}"} for q, a in [("What is 2+3?", 5), ("", 1), ("What is 4*5?", 20)]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items, audit = validated_benchmark_items(lambda p: benchmark_items("GSM8K", 10, 0, path=p), "GSM8K", str(path),
                                             ValidationSettings.for_section("benchmarks"), None)
    assert items["prompt"].tolist() == ["What is 2+3?", "What is 4*5?"]
    assert audit["files"][str(path)] == {"rows_in": 3, "rows_kept": 2, "rows_quarantined": 1,
                                         "quarantined_by_reason": {"missing_prompt": 1}}


# ---------------------------------------------------------------------------------------------------------------
# Bad data files through the real rules.

def _jsonl(path: Path, rows: list) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path.name


def _math(n: int, start: int = 0) -> list[dict]:
    return [{"question": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)} for i in range(start, start + n)]


def _mc(letter: str) -> dict:
    return {"prompt": f"Which option is {letter}?\n" + "\n".join(f"{x}) {x.lower()}" for x in "ABCD"), "answer": letter}


def _config(tmp: Path, files: list[dict], gsm8k: str, validation: dict) -> Path:
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["corpus"].update(sources=["chain_sum", "syllogism", "unit_conversion"], items_per_domain=3, files=files)
    config["benchmarks"].update(names=["GSM8K", "syllogism", "unit_conversion"], items=4, files={"GSM8K": gsm8k})
    config["data_validation"] = validation
    (tmp / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp / "config.yaml"


def _start_snakemake(tmp: Path, *targets: str) -> subprocess.Popen:
    """The real rules on the config in `tmp`, with --keep-going so that every failing job reports its message."""
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                             str(tmp), "--configfile", str(tmp / "config.yaml"), "--cores", "1", "--keep-going",
                             *targets], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _quarantine(path: Path) -> list[tuple]:
    return [(r["file"], r["line"], r["reason"]) for r in map(json.loads, path.read_text().splitlines())]


def _write_bad_corpus_files(tmp: Path) -> tuple[list[dict], dict]:
    """Eleven corpus files, each with good rows and planted bad ones: (corpus.files entries, file -> reason counts)."""
    planted = {
        "empty_prompt.jsonl": (_math(3) + [{"question": "   ", "answer": "4"}], {"missing_prompt": 1}),
        "duplicate_ids.jsonl": ([{**r, "id": i} for r, i in zip(_math(4, 10), ["a", "b", "a", "train-chain_sum-000000"])],
                                {"duplicate_id": 2}),
        "unknown_domain.jsonl": (_math(3, 20) + [{**_math(1, 30)[0], "domain": "biology"},
                                                 {**_math(1, 31)[0], "answer_format": "free_text"}],
                                 {"unknown_domain": 1, "unknown_answer_format": 1}),
        "math_gold.jsonl": (_math(3, 40) + [{"question": "Prove it.", "answer": "no answer given."}],
                            {"unparseable_answer": 1}),
        "mc_gold.jsonl": ([_mc("A"), _mc("B"), {**_mc("C"), "answer": "E"}, {**_mc("D"), "answer": "(D)"}],
                          {"unparseable_answer": 2}),
        "kk_gold.jsonl": ([{"question": "Zoey says Oliver lies. Who is who?", "answer": "Zoey is a knight, Oliver is a knave"},
                           {"question": "Anna says she lies. Who is who?", "answer": "Anna is confused"}],
                          {"unparseable_answer": 1}),
        "malformed.jsonl": (_math(2, 50) + ['{"question": "What is 1+1?", "answer": ', "[1, 2]"], {"malformed_json": 2}),
        "long_prompt.jsonl": (_math(3, 60) + [{"question": "What is 1+2? " * 40, "answer": "3"}],
                              {"prompt_too_long": 1}),
        "repeats_a_prompt.jsonl": (_math(2, 70) + _math(1, 0), {"duplicate_prompt": 1}),
    }
    formats = {"mc_gold.jsonl": ("science", "multiple_choice"), "kk_gold.jsonl": ("logic", "knights_knaves")}
    files = []
    for name, (rows, _) in planted.items():
        _jsonl(tmp / name, rows)
        domain, fmt = formats.get(name, ("math", "math"))
        files.append({"path": name, "domain": domain, "answer_format": fmt})
    # invalid UTF-8 bytes on line 2 (a text reader would stop there or mangle them)
    (tmp / "invalid_utf8.jsonl").write_bytes(
        b'{"question": "What is 1+7?", "answer": "8"}\n{"question": "Was kostet der K\xe4se?", "answer": "3"}\n'
        b'{"question": "What is 2+7?", "answer": "9"}\n')
    pd.DataFrame({"prompt": [f"What is {i}*3?" for i in range(5)], "answer": ["0", None, "6", None, "12"],
                  "domain": ["math", None, "math", "math", "math"]}).to_parquet(tmp / "null_answers.parquet")
    files += [{"path": "invalid_utf8.jsonl", "answer_format": "math", "domain": "math"},
              {"path": "null_answers.parquet", "answer_format": "math"}]
    counts = {name: reasons for name, (_, reasons) in planted.items()}
    return files, {**counts, "invalid_utf8.jsonl": {"invalid_utf8": 1}, "null_answers.parquet": {"missing_answer": 2}}


def test_bad_data_files_through_the_corpus_and_benchmark_rules(tmp_path):
    # Raised thresholds: every bad row is quarantined and counted, the good rows are kept.
    passing, failing = tmp_path / "passing", tmp_path / "failing"
    passing.mkdir(), failing.mkdir()
    files, planted = _write_bad_corpus_files(passing)
    # GSM8K in its native columns: an empty question, undecodable bytes and a malformed line among good rows
    (passing / "gsm8k.jsonl").write_bytes(
        b"".join(json.dumps({"question": q, "answer": f"Add them.\n#### {a}"}).encode() + b"\n"
                 for q, a in [("Tom has 2 apples and buys 3. How many?", 5), ("", 7),
                              ("Ann reads 4 pages a day for 5 days. How many pages?", 20)])
        + b'{"question": "Bob has 2 \xff pens", "answer": "#### 2"}\n{"question": \n')
    _config(passing, files, "gsm8k.jsonl", {"corpus": {"max_quarantine_fraction": 0.6, "max_prompt_chars": 200},
                                            "benchmarks": {"max_quarantine_fraction": 0.6}})
    # Default thresholds: a corpus file 10% bad and one bad GSM8K item each fail their quarantine gate, leaving the
    # data as built, the quarantined rows to inspect and the other jobs' outputs in place.
    _jsonl(failing / "over.jsonl", _math(18, 100) + [{"question": "Q1?", "answer": ""}, {"question": "Q2?"}])
    _jsonl(failing / "gsm8k_one_bad.jsonl", [{"question": "Tom has 2 apples. How many?", "answer": "#### 2"},
                                             {"question": "", "answer": "#### 3"}])
    _config(failing, [{"path": "over.jsonl", "domain": "math", "answer_format": "math"}], "gsm8k_one_bad.jsonl", {})
    targets = ("results/corpus/raw.parquet", "results/benchmarks/GSM8K.parquet", "results/gates/quarantine/corpus.json",
               "results/gates/quarantine/GSM8K.json")
    runs = [_start_snakemake(passing, *targets), _start_snakemake(failing, *targets, "results/benchmarks/syllogism.parquet")]
    (_, passing_log), (_, failing_log) = (run.communicate(timeout=300) for run in runs)

    assert runs[0].returncode == 0, passing_log[-3000:]
    audit = json.loads((passing / "results/corpus/raw_audit.json").read_text())
    corpus = pd.read_parquet(passing / "results/corpus/raw.parquet")
    for name, reasons in planted.items():
        counts = audit["files"][name]
        assert counts["quarantined_by_reason"] == reasons, name
        assert counts["rows_in"] == counts["rows_kept"] + counts["rows_quarantined"], name
        assert (corpus["source"] == Path(name).stem).sum() == counts["rows_kept"], name
    assert audit["files"]["invalid_utf8.jsonl"]["rows_in"] == 3 and audit["files"]["null_answers.parquet"]["rows_in"] == 5
    quarantined = _quarantine(passing / "results/corpus/quarantine.jsonl")
    assert ("invalid_utf8.jsonl", 2, "invalid_utf8") in quarantined
    assert ("malformed.jsonl", 3, "malformed_json") in quarantined and ("null_answers.parquet", 4, "missing_answer") in quarantined
    assert len(quarantined) == audit["quarantine"]["rows"] == sum(sum(r.values()) for r in planted.values())
    assert audit["rows"] == len(corpus) and not corpus["id"].duplicated().any()
    benchmark_audit = json.loads((passing / "results/benchmarks/GSM8K.audit.json").read_text())
    assert benchmark_audit["files"]["gsm8k.jsonl"] == {
        "rows_in": 5, "rows_kept": 2, "rows_quarantined": 3,
        "quarantined_by_reason": {"invalid_utf8": 1, "malformed_json": 1, "missing_prompt": 1}}
    assert len(pd.read_parquet(passing / "results/benchmarks/GSM8K.parquet")) == 2
    gate = json.loads((passing / "results/gates/quarantine/GSM8K.json").read_text())
    assert gate["failed"] == [] and gate["files"]["gsm8k.jsonl"]["quarantined_share"] == 3 / 5

    assert runs[1].returncode != 0
    assert ("quarantine gate failed (results/corpus/raw_audit.json): 1 file(s) lost more rows than "
            "data_validation.corpus.max_quarantine_fraction allows:\n  over.jsonl: 2 of 20 rows quarantined (10.0%) > "
            "data_validation.corpus.max_quarantine_fraction = 0.05 (quarantined: missing_answer 2); inspect "
            "results/corpus/quarantine.jsonl\nFix the rows, or raise data_validation.corpus.max_quarantine_fraction: "
            "only this gate reruns, the data stay as built") in failing_log
    assert ("gsm8k_one_bad.jsonl: 1 of 2 rows quarantined (50.0%) > data_validation.benchmarks.max_quarantine_fraction"
            " = 0.0 (quarantined: missing_prompt 1); inspect results/benchmarks/GSM8K.quarantine.jsonl") in failing_log
    assert [reason for *_, reason in _quarantine(failing / "results/corpus/quarantine.jsonl")] == ["missing_answer"] * 2
    assert _quarantine(failing / "results/benchmarks/GSM8K.quarantine.jsonl") == [("gsm8k_one_bad.jsonl", None, "missing_prompt")]
    assert (failing / "results/corpus/raw.parquet").is_file()  # the data as built; the gate's report is not
    assert not (failing / "results/gates/quarantine/corpus.json").exists()
    syllogism = json.loads((failing / "results/benchmarks/syllogism.audit.json").read_text())
    assert syllogism["files"]["syllogism"] == {"rows_in": 4, "rows_kept": 4, "rows_quarantined": 0,
                                               "quarantined_by_reason": {}}
    assert (failing / "results/benchmarks/syllogism.parquet").is_file()


# ---------------------------------------------------------------------------------------------------------------
# Issue 15: length caps, field types, duplicate benchmark items, unreadable files.

def test_length_caps_have_generous_defaults_and_are_configurable():
    corpus, benchmarks = ValidationSettings.for_section("corpus", {}), ValidationSettings.for_section("benchmarks", {})
    assert (corpus.max_prompt_chars, corpus.max_answer_chars) == (20_000, 2_000)
    assert (benchmarks.max_prompt_chars, benchmarks.max_answer_chars) == (20_000, 2_000)
    assert benchmarks.allow_duplicates is False
    assert ValidationSettings.for_section("corpus", {"max_answer_chars": 5}).max_answer_chars == 5
    assert item_problem(item(prompt="x" * 1_000_000), FORMATS, 20_000, 2_000) == (
        "prompt_too_long", "1000000 characters > 20000")
    assert item_problem(item(answer="1" * 2_001), FORMATS, 20_000, 2_000) == (
        "answer_too_long", "2001 characters > 2000")
    assert item_problem(item(answer="1" * 2_000), FORMATS, 20_000, 2_000) is None  # the cap itself passes


def test_writing_a_data_validation_default_out_is_leaving_it_out():
    """Every default of a data_validation section lives in ValidationSettings: a section that writes its defaults out
    resolves to the same settings, row checks and slices as one that leaves them out."""
    defaults = {"corpus": {"max_quarantine_fraction": 0.05, "max_prompt_chars": 20_000, "max_answer_chars": 2_000},
                "benchmarks": {"max_quarantine_fraction": 0.0, "max_prompt_chars": 20_000, "max_answer_chars": 2_000,
                               "allow_duplicates": False}}
    for section, written in defaults.items():
        assert ValidationSettings.for_section(section, written) == ValidationSettings.for_section(section)
        assert ValidationSettings.for_section(section, written).row_checks() == {}
    assert ValidationSettings.for_section("benchmarks", {"allow_duplicates": True, "max_prompt_chars": 20_000,
                                                         "max_answer_chars": 7}).row_checks() == {
        "allow_duplicates": True, "max_answer_chars": 7}
    assert ValidationSettings.for_section("corpus", {"max_prompt_tokens": 9, "max_quarantine_fraction": 0.2}
                                          ).row_checks() == {}  # gates: in no slice
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    left_out = Study.from_config(config)
    written_out = Study.from_config({**config, "data_validation": defaults})
    assert written_out.data_validation == left_out.data_validation
    assert written_out.clean_corpus_slice() == left_out.clean_corpus_slice()
    changed = Study.from_config({**config, "data_validation": {"benchmarks": {"max_answer_chars": 7}}})
    benchmark = config["benchmarks"]["names"][0]
    assert changed.benchmark_slice(benchmark) == {**left_out.benchmark_slice(benchmark),
                                                  "data_validation.benchmarks.max_answer_chars": 7}
    assert changed.max_quarantine_fraction("benchmarks") == 0.0 and left_out.max_quarantine_fraction("corpus") == 0.05


@pytest.mark.parametrize("value,found", [
    (["#### 2"], "a list (['#### 2'])"), ({"value": 2}, "an object ({'value': 2})"), (True, "a boolean (True)"),
    (np.array(["a", "b"]), "a list (['a', 'b'])")])
def test_a_text_field_of_another_type_names_the_field_and_the_type(value, found):
    assert text_type_problem("answer", value) == f"field 'answer' holds {found}, expected text or a number"


@pytest.mark.parametrize("field, value, found", [("answer", float("inf"), "a float (inf)"),
                                                ("question", float("-inf"), "a float (-inf)"),
                                                ("id", np.float64("inf"), "a float64 (inf)")])
def test_an_infinite_number_is_a_type_error_not_the_text_inf(field, value, found):
    """JSON's Infinity and -Infinity parse as floats; written out they would be the gold 'inf' or the prompt '-inf'."""
    assert text_type_problem(field, value) == f"field {field!r} holds {found}, expected text or a finite number"


@pytest.mark.parametrize("value", ["5", 5, 2.5, None, float("nan")])
def test_text_numbers_and_missing_values_are_not_type_errors(value):
    assert text_type_problem("answer", value) is None


def _validate(name: str, path: Path, quarantine: Path | None = None, **section):
    settings = ValidationSettings.for_section("benchmarks", section)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkSizeWarning)
        return validated_benchmark_items(lambda p: benchmark_items(name, 0, 0, path=p), name, str(path), settings,
                                         quarantine and str(quarantine))


def test_benchmark_fields_of_the_wrong_type_are_quarantined_not_stringified(tmp_path):
    good = [{"question": f"Tom has {i} apples and buys one. How many?", "answer": f"#### {i + 1}"} for i in range(4)]
    bad = [{"question": ["Tom has 2 apples."], "answer": "#### 2"},
           {"question": "Ann has 1 pen?", "answer": ["#### 2"]},
           {"question": "Bob has 3 cups?", "answer": {"value": "#### 3"}}]
    path = tmp_path / "gsm8k.jsonl"
    _jsonl(path, good + bad)
    items, audit = _validate("GSM8K", path)
    assert items["answer"].tolist() == ["1", "2", "3", "4"]  # no gold "2']" from str(["#### 2"])
    assert audit["files"][str(path)]["quarantined_by_reason"] == {"wrong_type": 3}


@pytest.mark.parametrize("name,row,detail", [
    ("GSM8K", {"question": "Q?", "answer": ["#### 2"]}, "field 'answer' holds a list (['#### 2']), expected text"),
    ("MMLU-Pro-physics", {"question_id": 1, "question": "Q?", "options": "a, b", "answer": "A", "answer_index": 0,
                          "category": "physics"}, "field 'options' holds a str ('a, b'), expected a list"),
    ("MMLU-Pro-physics", {"question_id": 1, "question": "Q?", "options": ["a", {"b": 1}], "answer": "A",
                          "answer_index": 0, "category": "physics"}, "field 'options[1]' holds an object"),
    ("MMLU-Pro-physics", {"question_id": 1, "question": "Q?", "options": ["a", "b"], "answer": "A",
                          "answer_index": "zero", "category": "physics"}, "field 'answer_index' holds a str ('zero')"),
    ("Knights&Knaves", {"quiz": "Zoey says...", "names": ["Zoey"], "solution": ["knight"]},
     "field 'solution[0]' holds a str ('knight'), expected true or false"),
    ("OlympiadBench", {"id": 1, "question": "Q?", "final_answer": [["$2$"]]}, "field 'final_answer[0]' holds a list"),
])
def test_each_reader_type_checks_the_fields_it_reads(tmp_path, name, row, detail):
    path, quarantine = tmp_path / "bench.jsonl", tmp_path / "quarantine.jsonl"
    _jsonl(path, [row])
    with pytest.raises(DataValidationError, match="no usable row .1 read; quarantined: wrong_type 1"):
        _validate(name, path, quarantine)
    [record] = map(json.loads, quarantine.read_text().splitlines())
    assert record["reason"] == "wrong_type" and record["detail"].startswith(f"source row 0: {detail}")


@pytest.mark.parametrize("name,good,bad,detail", [
    ("Knights&Knaves", [{"quiz": "Zoey says Oliver lies.", "names": ["Zoey", "Oliver"], "solution": [True, False]},
                        {"quiz": "Ann says Bob lies.", "names": ["Ann", "Bob"], "solution": [False, True]}],
     {"quiz": "Eve says...", "names": ["Eve", "Max", "Ida"], "solution": [True, False]},
     "3 names but 2 solution values"),
    ("ZebraLogic", [{"id": "z1", "puzzle": "Two houses.", "question": "Who owns the cat?", "choices": ["Ann", "Bob"],
                     "answer": "Bob"},
                    {"id": "z2", "puzzle": "Two houses.", "question": "Who owns the dog?", "choices": ["Ann", "Bob"],
                     "answer": "Ann"}],
     {"id": "z3", "puzzle": "Two houses.", "question": "Who owns the fish?", "choices": ["Ann", "Bob"],
      "answer": "Cat"}, "answer 'Cat' is not one of the choices ['Ann', 'Bob']"),
    ("MMLU-Pro-physics", [{"question_id": 1, "question": "Q1?", "options": ["a", "b"], "answer": "A",
                           "answer_index": 0, "category": "physics"},
                          {"question_id": 2, "question": "Q2?", "options": ["a", "b"], "answer": "B",
                           "answer_index": 1, "category": "physics"}],
     {"question_id": 3, "question": "Q3?", "options": ["a", "b"], "answer": "B", "answer_index": 0,
      "category": "physics"}, "answer 'B' disagrees with answer_index 0"),
    # an answer_index past the options (a letter beyond them, or beyond every letter), or counted from the end
    *[("MMLU-Pro-physics", [{"question_id": 1, "question": "Q1?", "options": ["a", "b"], "answer": "A",
                             "answer_index": 0, "category": "physics"},
                            {"question_id": 2, "question": "Q2?", "options": ["a", "b"], "answer": "B",
                             "answer_index": 1, "category": "physics"}],
       {"question_id": 3, "question": "Q3?", "options": ["a", "b"], "answer": answer, "answer_index": index,
        "category": "physics"},
       f"answer_index {index} is not the position of one of the row's 2 options (0 to 1)")
      for answer, index in (("E", 4), ("A", 40), ("B", -1))],
    ("MMLU-Pro-physics", [{"question_id": 1, "question": "Q1?", "options": ["a", "b", "N/A", "N/A"], "answer": "A",
                           "answer_index": 0, "category": "physics"},
                          {"question_id": 2, "question": "Q2?", "options": ["a", "b"], "answer": "B",
                           "answer_index": 1, "category": "physics"}],
     {"question_id": 3, "question": "Q3?", "options": ["4 J", "2 J", "4  J"], "answer": "A", "answer_index": 0,
      "category": "physics"},
     "options: option C is the same text as the correct answer, option A: '4  J'; a copy of the correct answer makes "
     "the gold letter ambiguous"),
    ("ZebraLogic", [{"id": "z1", "puzzle": "Two houses.", "question": "Who owns the cat?", "choices": ["Ann", "Bob"],
                     "answer": "Bob"},
                    {"id": "z2", "puzzle": "Two houses.", "question": "Who owns the dog?", "choices": ["Ann", "Bob"],
                     "answer": "Ann"}],
     {"id": "z3", "puzzle": "Two houses.", "question": "Who owns the fish?", "choices": ["Ann", "Bob", "Ann"],
      "answer": "Ann"}, "choices: option C is the same text as the correct answer, option A: 'Ann'; a copy of the "
                        "correct answer makes the gold letter ambiguous"),
])
def test_a_row_whose_fields_contradict_each_other_is_quarantined_not_a_failed_file(tmp_path, name, good, bad, detail):
    """A row the reader cannot combine into an item is counted and kept for inspection, and the file's other rows are
    read (at the default benchmark threshold the job then fails with this report, not a traceback)."""
    path, quarantine = tmp_path / "bench.jsonl", tmp_path / "quarantine.jsonl"
    _jsonl(path, [good[0], bad, good[1]])
    items, audit = _validate(name, path, quarantine)
    assert audit["files"][str(path)]["quarantined_by_reason"] == {"inconsistent_row": 1} and len(items) == 2
    [record] = map(json.loads, quarantine.read_text().splitlines())
    assert record["reason"] == "inconsistent_row" and record["detail"] == f"source row 1: {detail}"


def _unreadable_files(tmp: Path) -> dict[str, str]:
    """Files no reader can use, each with the problem file_problem must report (what was expected, what was found)."""
    jsonl, parquet = "expected a JSONL file (UTF-8 text, one JSON object per line)", "expected a parquet file"
    (tmp / "empty.jsonl").write_bytes(b"")
    (tmp / "empty.parquet").write_bytes(b"")
    (tmp / "text.parquet").write_text('{"question": "What is 1+1?", "answer": "2"}\n')
    (tmp / "folder.jsonl").mkdir()
    (tmp / "folder.jsonl" / "rows.jsonl").write_text("{}\n")
    (tmp / "utf16.jsonl").write_bytes('{"question": "What is 1+1?", "answer": "2"}\n'.encode("utf-16"))
    (tmp / "utf16be.jsonl").write_bytes('{"question": "What is 1+1?", "answer": "2"}\n'.encode("utf-16-be"))
    (tmp / "cut.parquet").write_bytes(b"PAR1" + b"\x00" * 20)
    return {"empty.jsonl": f"{jsonl}, found an empty file (0 bytes)",
            "empty.parquet": f"{parquet}, found an empty file (0 bytes)",
            "text.parquet": (f"{parquet}, found text starting '{{\"question\": \"What is 1+1?\", \"answer\": \"'; "
                             "write it as parquet, or give a JSONL file the suffix .jsonl"),
            "folder.jsonl": f"{jsonl}, found a directory; give the path of the file itself",
            "utf16.jsonl": f"{jsonl}, found UTF-16 text (byte-order mark ff fe); save it as UTF-8",
            "utf16be.jsonl": f"{jsonl}, found binary data starting b'\\x00{{\\x00\"\\x00q",
            "cut.parquet": f"{parquet}, found one the parquet reader rejects ("}


def test_an_unreadable_file_is_one_line_saying_what_was_expected_and_found(tmp_path):
    for name, problem in _unreadable_files(tmp_path).items():
        assert file_problem(tmp_path / name).startswith(problem), name
    assert file_problem(tmp_path / "absent.jsonl") == ("expected a JSONL file (UTF-8 text, one JSON object per line), "
                                                       "found nothing at this path")
    pd.DataFrame({"prompt": ["What is 1+1?"], "answer": ["2"]}).to_parquet(tmp_path / "good.parquet")
    assert file_problem(tmp_path / "good.parquet") is None
    assert file_problem(tmp_path / "folder.jsonl/rows.jsonl") is None


def test_an_unreadable_benchmark_file_fails_with_its_path_before_the_loader_runs(tmp_path):
    _unreadable_files(tmp_path)
    for name in ("empty.jsonl", "text.parquet", "folder.jsonl", "utf16.jsonl"):
        with pytest.raises(DataValidationError) as failure:
            _validate("GSM8K", tmp_path / name)
        assert str(failure.value).startswith(f"data validation failed:\n  {tmp_path / name}: expected a "), name
        assert "Traceback" not in str(failure.value) and len(str(failure.value).splitlines()) == 2


@pytest.mark.filterwarnings("ignore::dataflex_rl.item_sources.loaders.BenchmarkSizeWarning")  # 5 of GSM8K's 1,319
def test_a_question_repeated_after_normalisation_is_refused_unless_allowed(tmp_path):
    rows = [{"question": "Tom has 2 apples. How many?", "answer": "#### 2"},
            {"question": "Ann has 3 pens. How many?", "answer": "#### 3"},
            {"question": "  tom HAS 2 apples.\nHow many? ", "answer": "#### 2"},
            {"question": "Tom has 2 apples. How many?", "answer": "#### 5"},
            {"question": "Tom has 2 apples! How many?", "answer": "#### 2"}]  # other punctuation: another question
    path, quarantine = tmp_path / "gsm8k.jsonl", tmp_path / "quarantine.jsonl"
    _jsonl(path, rows)
    items, audit = validated_benchmark_items(lambda p: benchmark_items("GSM8K", 0, 0, path=p), "GSM8K", str(path),
                                             ValidationSettings.for_section("benchmarks", {}), str(quarantine))
    assert items["id"].tolist() == ["GSM8K-000000", "GSM8K-000001", "GSM8K-000004"]
    with pytest.raises(QuarantineGateError) as failure:  # the default benchmark threshold: no row may be lost
        check_quarantine(audit, "GSM8K.audit.json", "benchmarks", 0.0, "f")
    assert "2 of 5 rows quarantined (40.0%) > data_validation.benchmarks.max_quarantine_fraction = 0.0 " \
           "(quarantined: duplicate_item 2)" in str(failure.value)
    assert [(r["reason"], r["id"]) for r in map(json.loads, quarantine.read_text().splitlines())] == [
        ("duplicate_item", "GSM8K-000002"), ("duplicate_item", "GSM8K-000003")]
    assert "the same question as item 'GSM8K-000000'" in quarantine.read_text()
    with pytest.warns(BenchmarkContentWarning, match="2 item.s. repeat an earlier question and are kept"):
        items, audit = validated_benchmark_items(lambda p: benchmark_items("GSM8K", 0, 0, path=p), "GSM8K", str(path),
                                                 ValidationSettings.for_section("benchmarks", {"allow_duplicates": True}),
                                                 None)
    assert len(items) == 5 and audit["duplicate_items_kept"] == 2 and len(audit["warnings"]) == 1


def test_the_same_question_with_other_options_is_not_a_duplicate():
    question = {"prompt": "Which of the following is true?", "id": "q"}
    rows = [{**question, "metadata": json.dumps({"options": ["a", "b"]})},
            {**question, "metadata": json.dumps({"options": ["c", "d"]}), "id": "r"},
            {**question, "metadata": json.dumps({"options": [" A", "b "]}), "id": "s"}]
    assert duplicate_items(rows) == {2: "q"}


def test_identical_gold_answers_throughout_are_a_warning_in_the_audit(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    _jsonl(path, [{"question": f"What is {i} - {i} + 4?", "answer": "#### 4"} for i in range(3)])
    with pytest.warns(BenchmarkContentWarning, match="all 3 gold answers are '4'"):
        items, audit = _validate("GSM8K", path)
    assert len(items) == 3 and audit["warnings"] == [
        "benchmark 'GSM8K': all 3 gold answers are '4'; a policy that always answers that scores 100% — check the "
        "file's answer column"]
    _jsonl(path, [{"question": f"What is {i} + 4?", "answer": f"#### {i + 4}"} for i in range(3)])
    assert "warnings" not in _validate("GSM8K", path)[1]


def test_procedural_stand_ins_repeat_no_question_and_keep_their_audit(tmp_path):
    """The default study's stand-ins (100 items each, seed 1000) pass the duplicate check: benchmark generation
    already drops exact repeats, and no two of its questions differ only by whitespace or case."""
    for name in ("chain_sum", "syllogism", "family_relationships", "aiw", "letter_counting", "kinematics"):
        items = benchmark_items(name, 100, 1000)
        kept, audit = validated_benchmark_items(lambda p: items, name, None, ValidationSettings.for_section("benchmarks"),
                                                None)
        assert len(kept) == 100 and set(audit) == {"benchmark", "files", "quarantine"}, name


def test_issue_15_data_files_through_the_corpus_and_benchmark_rules(tmp_path):
    kept, refused = tmp_path / "kept", tmp_path / "refused"
    kept.mkdir(), refused.mkdir()
    # Raised thresholds: over-long and wrong-typed rows are quarantined and counted; a repeated GSM8K question is kept
    # under allow_duplicates and counted; MATH-500 with one gold throughout is kept with a warning.
    _jsonl(kept / "types.jsonl", _math(4) + [{"question": "What is 1+1?", "answer": ["#### 2"]},
                                             {"question": ["What is 2+2?"], "answer": "4"},
                                             {"question": "What is 3+3?", "answer": {"value": 6}},
                                             {"question": "Is 2 even?", "answer": True},
                                             {"question": "What is 1/0?", "answer": float("inf")}])
    _jsonl(kept / "lengths.jsonl", _math(4, 20) + [{"question": "What is 1+2? " * 2_000, "answer": "3"},
                                                   {"question": "Spell out pi.", "answer": "3" * 2_001}])
    gsm8k = [{"question": f"Tom has {i} apples and buys one. How many?", "answer": f"#### {i + 1}"} for i in range(6)]
    _jsonl(kept / "gsm8k.jsonl", gsm8k + [{**gsm8k[0], "question": gsm8k[0]["question"].upper()},
                                          {"question": "Q?", "answer": ["#### 2"]}, {"question": "x " * 10_001,
                                                                                    "answer": "#### 1"},
                                          {"question": "How many apples in all?", "answer": float("-inf")}])
    _jsonl(kept / "math500.jsonl", [{"problem": f"What is {i} - {i} + 7?", "answer": "7", "unique_id": f"u{i}"}
                                    for i in range(3)])
    _config(kept, [{"path": n, "domain": "math", "answer_format": "math"} for n in ("types.jsonl", "lengths.jsonl")],
            "gsm8k.jsonl", {"corpus": {"max_quarantine_fraction": 0.6},
                            "benchmarks": {"max_quarantine_fraction": 0.6, "allow_duplicates": True}})
    config = yaml.safe_load((kept / "config.yaml").read_text())
    config["benchmarks"]["names"].append("MATH-500")
    config["benchmarks"]["files"]["MATH-500"] = "math500.jsonl"
    (kept / "config.yaml").write_text(yaml.safe_dump(config))
    # Default settings: unreadable corpus files and one without an answer column each end in one line of the report;
    # unreadable benchmark files fail their benchmark_items jobs, a repeated GSM8K question its quarantine gate.
    problems = _unreadable_files(refused)
    corpus_files = ["empty.jsonl", "text.parquet", "folder.jsonl", "utf16.jsonl"]
    _jsonl(refused / "no_answer_column.jsonl", [{"question": r["question"], "solution": r["answer"]} for r in _math(3)])
    _jsonl(refused / "gsm8k.jsonl", gsm8k + [{**gsm8k[2], "question": "  " + gsm8k[2]["question"] + " "}])
    _config(refused, [{"path": name, "domain": "math", "answer_format": "math"}
                      for name in corpus_files + ["no_answer_column.jsonl"]], "gsm8k.jsonl", {})
    config = yaml.safe_load((refused / "config.yaml").read_text())
    config["benchmarks"]["names"] += ["MATH-500", "AIME-2024"]
    config["benchmarks"]["files"].update({"MATH-500": "utf16be.jsonl", "AIME-2024": "cut.parquet"})
    (refused / "config.yaml").write_text(yaml.safe_dump(config))
    runs = [_start_snakemake(kept, "results/corpus/raw.parquet", "results/benchmarks/GSM8K.parquet",
                             "results/benchmarks/MATH-500.parquet"),
            _start_snakemake(refused, "results/corpus/raw.parquet", "results/gates/quarantine/GSM8K.json",
                             "results/benchmarks/MATH-500.parquet", "results/benchmarks/AIME-2024.parquet")]
    (_, kept_log), (_, refused_log) = (run.communicate(timeout=300) for run in runs)

    assert runs[0].returncode == 0, kept_log[-3000:]
    audit = json.loads((kept / "results/corpus/raw_audit.json").read_text())
    assert audit["files"]["types.jsonl"]["quarantined_by_reason"] == {"wrong_type": 5}
    assert audit["files"]["lengths.jsonl"]["quarantined_by_reason"] == {"answer_too_long": 1, "prompt_too_long": 1}
    details = [json.loads(line)["detail"] for line in (kept / "results/corpus/quarantine.jsonl").open()]
    assert details == ["field 'answer' holds a list (['#### 2']), expected text or a number",
                       "field 'question' holds a list (['What is 2+2?']), expected text or a number",
                       "field 'answer' holds an object ({'value': 6}), expected text or a number",
                       "field 'answer' holds a boolean (True), expected text or a number",
                       "field 'answer' holds a float (inf), expected text or a finite number",
                       "26000 characters > 20000", "2001 characters > 2000"]
    gsm8k_audit = json.loads((kept / "results/benchmarks/GSM8K.audit.json").read_text())
    assert gsm8k_audit["files"]["gsm8k.jsonl"] == {"rows_in": 10, "rows_kept": 7, "rows_quarantined": 3,
                                                  "quarantined_by_reason": {"prompt_too_long": 1, "wrong_type": 2}}
    assert gsm8k_audit["duplicate_items_kept"] == 1
    assert len(pd.read_parquet(kept / "results/benchmarks/GSM8K.parquet")) == 7
    math_audit = json.loads((kept / "results/benchmarks/MATH-500.audit.json").read_text())
    assert math_audit["warnings"] == ["benchmark 'MATH-500': all 3 gold answers are '7'; a policy that always answers "
                                      "that scores 100% — check the file's answer column"]
    assert "all 3 gold answers are '7'" in (kept / "logs/benchmarks/MATH-500.log").read_text()

    assert runs[1].returncode != 0
    for name in corpus_files + ["utf16be.jsonl", "cut.parquet"]:
        assert f"  {name}: {problems[name]}" in refused_log, name
    assert "data validation failed:\n  " + "\n  ".join(f"{name}: {problems[name]}" for name in corpus_files) \
        in refused_log
    assert ("no_answer_column.jsonl: no usable row (3 read; quarantined: missing_answer 3); inspect "
            "results/corpus/quarantine.jsonl; a row needs prompt (or question) and answer text") in refused_log
    assert ("gsm8k.jsonl: 1 of 7 rows quarantined (14.3%) > data_validation.benchmarks.max_quarantine_fraction = 0.0 "
            "(quarantined: duplicate_item 1)") in refused_log
    assert "ArrowInvalid" not in refused_log and "UnicodeDecodeError" not in refused_log
    assert not (refused / "results/corpus/raw.parquet").exists()


def test_every_reason_and_unreadable_file_is_documented(tmp_path):
    documented = (REPO / "docs/refusals.md").read_text()
    assert [reason for reason in REASONS if f"`{reason}`" not in documented] == []
    for problem in _unreadable_files(tmp_path).values():
        assert problem.split(", found ")[1].split(" (")[0].split("'")[0] in documented, problem


GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")


def test_a_gpqa_row_whose_correct_answer_is_also_an_incorrect_one_is_quarantined(tmp_path):
    rows = [dict(zip(GPQA_COLUMNS, ("Capital of France?", "Paris", "Lyon", "Nice", "Lille"))),
            dict(zip(GPQA_COLUMNS, ("Capital of Italy?", "Rome", "Milan", "Rome ", "Turin"))),
            dict(zip(GPQA_COLUMNS, ("Capital of Spain?", "Madrid", "Seville", "Bilbao", "Malaga")))]
    path, quarantine = tmp_path / "gpqa_diamond.csv", tmp_path / "quarantine.jsonl"
    pd.DataFrame(rows).to_csv(path, index=False)
    items, audit = _validate("GPQA-Diamond", path, quarantine)
    assert audit["files"][str(path)]["quarantined_by_reason"] == {"inconsistent_row": 1} and len(items) == 2
    [record] = map(json.loads, quarantine.read_text().splitlines())
    order = gpqa_order("Capital of Italy?")
    gold, copy = LETTERS[order.index(0)], LETTERS[order.index(2)]
    assert record["reason"] == "inconsistent_row" and record["detail"] == (
        f"source row 1: Correct Answer / Incorrect Answer 1-3: option {copy} (Incorrect Answer 2) is the same text as "
        f"the correct answer, option {gold} (Correct Answer): 'Rome'; a copy of the correct answer makes the gold "
        f"letter ambiguous")


def test_a_gpqa_row_whose_incorrect_answers_repeat_each_other_keeps_all_four_options_and_one_gold(tmp_path):
    """Two official GPQA-Diamond rows have two incorrect options with the same text: the gold letter is still one
    (the shuffle orders the columns, not their texts), and the options are kept as shipped, as harnesses show them."""
    row = dict(zip(GPQA_COLUMNS, ("Capital of Germany?", "Berlin", "Munich", "Hamburg", "Munich")))
    path = tmp_path / "gpqa_diamond.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    items, audit = _validate("GPQA-Diamond", path)
    [item] = items.to_dict("records")
    metadata = item_metadata(item)
    assert audit["files"][str(path)]["rows_quarantined"] == 0 and len(metadata["options"]) == 4
    assert sorted(metadata["options"]) == ["Berlin", "Hamburg", "Munich", "Munich"]
    assert metadata["options"][LETTERS.index(item["answer"])] == "Berlin"
    assert metadata["option_sources"][LETTERS.index(item["answer"])] == "Correct Answer"
    assert item["answer"] == LETTERS[gpqa_order("Capital of Germany?").index(0)]


@pytest.mark.parametrize("name, row", [
    ("MMLU-Pro-physics", {"question_id": 1, "question": "Q1?", "options": ["4 J", "2 J", "2  J"], "answer": "A",
                          "answer_index": 0, "category": "physics"}),
    ("ZebraLogic", {"id": "z1", "puzzle": "Two houses.", "question": "Who owns the cat?",
                    "choices": ["Ann", "Bob", "Ann"], "answer": "Bob"}),
])
def test_wrong_options_that_repeat_each_other_are_kept_in_every_multiple_choice_reader(tmp_path, name, row):
    path = tmp_path / "bench.jsonl"
    _jsonl(path, [row])
    items, audit = _validate(name, path)
    [item] = items.to_dict("records")
    assert audit["files"][str(path)]["rows_quarantined"] == 0
    assert item_metadata(item)["options"] == row.get("options", row.get("choices"))
    assert item["answer"] == ("A" if name.startswith("MMLU") else "B")


def test_an_official_format_gpqa_diamond_file_with_repeated_incorrect_answers_passes_the_gate_at_threshold_0(tmp_path):
    """All 198 rows of a file in the official CSV's columns load, two of them with two incorrect options of the same
    text, and the benchmarks' quarantine gate passes at its default threshold 0 (issue 36: it stopped the paper
    config)."""
    extra = ("Pre-Revision Question", "Explanation", "Record ID", "High-level domain", "Subdomain")
    rows = [dict(zip(GPQA_COLUMNS + extra, (
        f"What is the energy, in eV, of level {i} of the model system, given \"the usual\" assumptions?",
        f"{i}.5 eV", f"{i}.1 eV", f"{i}.2 eV, or more", f"{i}.3 eV", f"Level {i} (draft)?", f"Because {i}.",
        f"rec{i:03d}Xq7Lm2Ap", "Physics", "Quantum Mechanics"))) for i in range(198)]
    for i in (17, 140):
        rows[i]["Incorrect Answer 3"] = rows[i]["Incorrect Answer 1"]
    path, quarantine = tmp_path / "gpqa_diamond.csv", tmp_path / "quarantine.jsonl"
    pd.DataFrame(rows).to_csv(path, index=False)
    items, audit = _validate("GPQA-Diamond", path, quarantine)
    threshold = ValidationSettings.for_section("benchmarks").max_quarantine_fraction
    report = check_quarantine(audit, "GPQA-Diamond.audit.json", "benchmarks", threshold, "f")
    assert threshold == 0.0 and report["failed"] == [] and len(items) == 198
    assert audit["files"][str(path)]["rows_quarantined"] == 0 and quarantine.read_text() == ""
    for i in (17, 140):
        item = items.to_dict("records")[i]
        options = item_metadata(item)["options"]
        assert len(options) == 4 and options.count(f"{i}.1 eV") == 2
        assert options[LETTERS.index(item["answer"])] == f"{i}.5 eV"


def test_a_utf8_byte_order_mark_is_read_as_utf8_in_benchmark_and_corpus_files(tmp_path):
    """Windows editors start a UTF-8 file with the bytes EF BB BF: the file reads as without them (no JSON error
    naming no file, no first row quarantined, no CSV column named '\\ufeffQuestion')."""
    bbh = {"canary": "c", "examples": [{"input": f"Sort: {w} a?\nOptions:\n(A) x\n(B) y", "target": target}
                                       for w, target in (("one", "(A)"), ("two", "(B)"), ("three", "(A)"))]}
    gsm8k = [{"question": f"Tom has {i} apples and buys one. How many?", "answer": f"#### {i + 1}"} for i in range(3)]
    gpqa = pd.DataFrame([{"Question": f"Q{i}?", "Correct Answer": "a", "Incorrect Answer 1": "b",
                          "Incorrect Answer 2": "c", "Incorrect Answer 3": "d"} for i in range(3)])
    written = {"BBH-logical-deduction": ("bbh.json", json.dumps(bbh)),
               "GSM8K": ("gsm8k.jsonl", "".join(json.dumps(row) + "\n" for row in gsm8k)),
               "GPQA-Diamond": ("gpqa.csv", gpqa.to_csv(index=False))}
    for name, (file, text) in written.items():
        plain, marked = tmp_path / f"plain_{file}", tmp_path / f"bom_{file}"
        plain.write_bytes(text.encode("utf-8"))
        marked.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
        expected, _ = _validate(name, plain)
        found, audit = _validate(name, marked)
        assert len(found) == 3 and audit["files"][str(marked)]["quarantined_by_reason"] == {}, name
        pd.testing.assert_frame_equal(found.drop(columns=["id"], errors="ignore"),
                                      expected.drop(columns=["id"], errors="ignore"), check_like=True)
    corpus = tmp_path / "mine.jsonl"
    corpus.write_bytes(b"\xef\xbb\xbf" + b'{"question": "What is 12*12?", "answer": 144}\n'
                       + b'{"question": "What is 2*3?", "answer": 6}\n')
    built, report = build_corpus(["chain_sum"], 2, seed=0, files=[{"path": str(corpus), "domain": "math",
                                                                          "answer_format": "math"}])
    assert report["files"][str(corpus)]["rows_kept"] == 2
    assert built.tail(2)["answer"].tolist() == ["144", "6"]


def _planned_jobs(tmp: Path, *targets: str) -> dict[str, int]:
    """The jobs a real dry run plans for `targets`, by rule."""
    result = forked_snakemake.snakemake(["-n", "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp),
                                         "--configfile", str(tmp / "config.yaml"), "--cores", "1", *targets],
                                        timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    if "Nothing to be done" in output:
        return {}
    stats = output.split("Job stats:")[1]
    return {rule: int(count) for rule, count in re.findall(r"^(\w+)\s+(\d+)\s*$", stats, re.MULTILINE)
            if rule != "total"}


def test_an_input_file_replaced_by_other_bytes_with_an_older_mtime_replans_the_job_that_reads_it(tmp_path):
    """`rsync -t`, `cp -p` or a backup restore put other bytes in place under an older mtime, which Snakemake alone
    would trust: the files' contents are in the params of the jobs that read them, so those jobs are planned again —
    and only those (the benchmark that was not replaced, and the generated ones, stay as built)."""
    _jsonl(tmp_path / "mine.jsonl", _math(4))
    gsm8k = [{"question": f"Tom has {i} apples and buys one. How many?", "answer": f"#### {i + 1}"} for i in range(6)]
    _jsonl(tmp_path / "gsm8k.jsonl", gsm8k)
    _config(tmp_path, [{"path": "mine.jsonl", "domain": "math", "answer_format": "math"}], "gsm8k.jsonl", {})
    targets = ("results/corpus/raw.parquet", *(f"results/benchmarks/{b}.parquet"
                                               for b in ("GSM8K", "syllogism", "unit_conversion")))
    built = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                            str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), "--cores", "1", *targets],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert _planned_jobs(tmp_path, *targets) == {}
    for name, rows in (("mine.jsonl", _math(4, 30)), ("gsm8k.jsonl", gsm8k[::-1])):
        path = tmp_path / name
        before = path.stat()
        _jsonl(path, rows)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns - 3_600 * 10**9))  # an hour older than it was
    assert _planned_jobs(tmp_path, *targets) == {"corpus": 1, "benchmark_items": 1}


def test_an_mmlu_pro_row_with_more_options_than_letters_is_quarantined_at_load(tmp_path):
    rows = [{"question_id": i, "question": f"Q{i}?", "options": [f"{i}-{k}" for k in range(n)], "answer": "A",
             "answer_index": 0, "category": "physics"} for i, n in enumerate((10, 11))]
    path, quarantine = tmp_path / "bench.jsonl", tmp_path / "quarantine.jsonl"
    _jsonl(path, rows)
    items, audit = _validate("MMLU-Pro-physics", path, quarantine)
    assert list(items["prompt"]) == ["Q0?"]
    [record] = map(json.loads, quarantine.read_text().splitlines())
    assert record["reason"] == "inconsistent_row"
    assert record["detail"].endswith("options: 11 options; at most 10 can be lettered A-J")


def test_jsonl_reader_quarantines_hostile_lines_one_by_one(tmp_path):
    path = tmp_path / "hostile.jsonl"
    path.write_text('{"prompt": "a", "answer": "1"}\n' + "[" * 100000 + "\n" + '{"prompt": "b", "answer": ' + "9" * 5000
                    + "}\n" + '{"prompt": "c", "answer": "3"}\n')
    report = FileReport(str(path))
    assert [line for line, _ in read_jsonl(path, report)] == [1, 4]
    assert [(r["line"], r["reason"]) for r in report.quarantined] == [(2, "malformed_json"), (3, "malformed_json")]
    assert "4300 digits" in report.quarantined[1]["detail"]


def test_a_bbh_target_letter_outside_its_options_is_quarantined_naming_the_letter_and_the_options(tmp_path):
    rows = {"examples": [{"input": f"Which is first?\nOptions:\n(A) x{i}\n(B) y{i}\n(C) z{i}", "target": target}
                         for i, target in enumerate(("(B)", "(E)"))]}
    path, quarantine = tmp_path / "bbh.json", tmp_path / "quarantine.jsonl"
    path.write_text(json.dumps(rows))
    items, audit = _validate("BBH-logical-deduction", path, quarantine)
    assert list(items["answer"]) == ["(B)"]
    [record] = map(json.loads, quarantine.read_text().splitlines())
    assert record["reason"] == "unparseable_answer"
    assert record["detail"].endswith("target '(E)' names option E, but the item's options are A, B, C")
