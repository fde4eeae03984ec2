"""Data validation: every bad row of a corpus or benchmark file is quarantined with its reason and counted, and a file
over its threshold fails its job naming the file, the counts, the threshold key and the quarantine file.

The unit tests build rows by hand; the workflow tests write bad data files and run the real `corpus` and
`benchmark_items` rules with Snakemake, checking the audit counts against the rows planted in each file.
"""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dataflex_rl.tasks.corpus import benchmark_items, build_corpus
from dataflex_rl.tasks.validation import (FILE_ANSWER_FORMATS, DataValidationError, FileReport, KeptRows,
                                          ValidationSettings, item_problem, keep_valid, read_jsonl, settle,
                                          validated_benchmark_items)

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


def test_threshold_is_a_fraction_of_each_file_and_the_quarantine_file_survives_the_failure(tmp_path):
    settings = ValidationSettings(0.05, "data_validation.corpus.max_quarantine_fraction")
    quarantine = tmp_path / "quarantine.jsonl"
    audit = settle([_report(20, 1)], settings, str(quarantine))  # 5% is allowed
    assert audit["files"]["data/x.jsonl"]["rows_kept"] == 19 and len(quarantine.read_text().splitlines()) == 1
    with pytest.raises(DataValidationError) as failure:
        settle([_report(20, 1), _report(20, 2)], settings, str(quarantine))
    assert str(failure.value) == (
        "data validation failed:\n  data/x.jsonl: 2 of 20 rows quarantined (10.0%) > "
        "data_validation.corpus.max_quarantine_fraction = 0.05 (quarantined: missing_answer 2); "
        f"inspect {quarantine}; fix the rows or raise data_validation.corpus.max_quarantine_fraction")
    assert len(quarantine.read_text().splitlines()) == 3
    with pytest.raises(DataValidationError, match="no usable row"):
        settle([_report(3, 3)], ValidationSettings(1.0, "k"), None)
    assert settle([], settings, str(quarantine))["quarantine"]["rows"] == 0 and quarantine.read_text() == ""


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


@pytest.mark.filterwarnings("ignore::dataflex_rl.benchmarks.loaders.BenchmarkSizeWarning")
def test_a_benchmark_row_quarantined_after_loading_is_removed_by_position(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    rows = [{"question": q, "answer": f"#### {a}"} for q, a in [("What is 2+3?", 5), ("", 1), ("What is 4*5?", 20)]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items, audit = validated_benchmark_items(lambda p: benchmark_items("GSM8K", 10, 0, path=p), "GSM8K", str(path),
                                             ValidationSettings(0.5, "k"), None)
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
    # Default thresholds: a corpus file 10% bad, a file without an answer column, and one bad GSM8K item each fail
    # their job, leaving the quarantined rows to inspect and the other jobs' outputs in place.
    _jsonl(failing / "over.jsonl", _math(18, 100) + [{"question": "Q1?", "answer": ""}, {"question": "Q2?"}])
    _jsonl(failing / "no_answer_column.jsonl", [{"question": r["question"], "solution": r["answer"]} for r in _math(3)])
    _jsonl(failing / "gsm8k_one_bad.jsonl", [{"question": "Tom has 2 apples. How many?", "answer": "#### 2"},
                                             {"question": "", "answer": "#### 3"}])
    _config(failing, [{"path": "over.jsonl", "domain": "math", "answer_format": "math"},
                      {"path": "no_answer_column.jsonl", "domain": "math", "answer_format": "math"}],
            "gsm8k_one_bad.jsonl", {})
    targets = ("results/corpus/raw.parquet", "results/benchmarks/GSM8K.parquet")
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

    assert runs[1].returncode != 0
    assert ("over.jsonl: 2 of 20 rows quarantined (10.0%) > data_validation.corpus.max_quarantine_fraction = 0.05 "
            "(quarantined: missing_answer 2); inspect results/corpus/quarantine.jsonl") in failing_log
    assert ("no_answer_column.jsonl: no usable row (3 read; quarantined: missing_answer 3); inspect "
            "results/corpus/quarantine.jsonl; a row needs prompt (or question) and answer text") in failing_log
    assert ("gsm8k_one_bad.jsonl: 1 of 2 rows quarantined (50.0%) > data_validation.benchmarks.max_quarantine_fraction"
            " = 0.0 (quarantined: missing_prompt 1); inspect results/benchmarks/GSM8K.quarantine.jsonl") in failing_log
    assert [reason for *_, reason in _quarantine(failing / "results/corpus/quarantine.jsonl")] == ["missing_answer"] * 5
    assert _quarantine(failing / "results/benchmarks/GSM8K.quarantine.jsonl") == [("gsm8k_one_bad.jsonl", None, "missing_prompt")]
    assert not (failing / "results/corpus/raw.parquet").exists()
    syllogism = json.loads((failing / "results/benchmarks/syllogism.audit.json").read_text())
    assert syllogism["files"]["syllogism"] == {"rows_in": 4, "rows_kept": 4, "rows_quarantined": 0,
                                               "quarantined_by_reason": {}}
    assert (failing / "results/benchmarks/syllogism.parquet").is_file()
