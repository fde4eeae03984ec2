"""A job that reads another job's artefact records the sha256 of what it read (dataflex_rl.artefacts.provenance,
`inputs`): the decontamination audit, the records table's metadata, a parquet table's metadata. Each recorded digest is
checked against hashlib.sha256 of the file's bytes, computed here. (The workflow's own jobs are checked on a real smoke
study in tests/test_workflow.py.)"""
import hashlib
from pathlib import Path

import pandas as pd

from dataflex_rl.artefacts.atomic import write_parquet
from dataflex_rl.corpus.decontam import decontaminate_files
from dataflex_rl.artefacts.provenance import inputs_metadata, parquet_inputs, write_provenance
from dataflex_rl.records.run_records import collect_records


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_decontamination_audit_records_the_corpus_and_each_benchmarks_items_as_read(tmp_path):
    corpus = tmp_path / "raw.parquet"
    pd.DataFrame({"id": ["c1", "c2"], "prompt": ["What is 2 + 3?", "Name the capital of France."],
                  "answer": ["5", "Paris"], "source": ["chain_sum", "syllogism"]}).to_parquet(corpus)
    benchmarks = [tmp_path / "gcd.parquet", tmp_path / "syllogism.parquet"]
    for path, prompt in zip(benchmarks, ["What is the gcd of 12 and 18?", "All cats are animals. Is Tom an animal?"]):
        pd.DataFrame({"id": [path.stem], "prompt": [prompt], "answer": ["6"],
                      "benchmark": [path.stem]}).to_parquet(path)
    audit = decontaminate_files(corpus, benchmarks, tmp_path / "clean.parquet", tmp_path / "audit.json",
                                threshold=0.8)
    assert audit["inputs"] == {
        "corpus": {"path": str(corpus), "sha256": sha256(corpus)},
        "items:gcd": {"path": str(benchmarks[0]), "sha256": sha256(benchmarks[0])},
        "items:syllogism": {"path": str(benchmarks[1]), "sha256": sha256(benchmarks[1])},
    }


def test_the_records_job_records_each_score_file_it_read_in_the_tables_metadata(tmp_path):
    sources = []
    for bench, correct in (("basic_arithmetic", [1, 0]), ("syllogism", [0, 0])):
        path = tmp_path / f"{bench}.parquet"
        pd.DataFrame({"prompt_id": ["p0", "p1"], "response": "a", "length": 4, "correct": correct,
                      "parsed": True}).to_parquet(path)
        write_provenance(tmp_path / f"{bench}.provenance.json", {"benchmark": bench}, [path])
        sources.append({"path": str(path), "provenance": str(tmp_path / f"{bench}.provenance.json"), "model": "m",
                        "method": "untrained", "seed": None, "benchmark": bench})
    scores = {}
    records = collect_records(sources, inputs=scores)
    out = tmp_path / "records.parquet"
    write_parquet(out, records, metadata=inputs_metadata(scores))
    assert parquet_inputs(out) == {source["path"]: {"path": source["path"], "sha256": sha256(source["path"])}
                                   for source in sources}
    # the metadata leaves the table as it was
    pd.testing.assert_frame_equal(pd.read_parquet(out), records)


def test_a_table_written_without_inputs_records_none(tmp_path):
    out = tmp_path / "plain.parquet"
    write_parquet(out, pd.DataFrame({"id": ["a"], "solve_rate": [0.5]}))
    assert parquet_inputs(out) == {}
