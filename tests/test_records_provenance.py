"""Provenance columns of the records: the config hash, the package versions; incomplete and imported tables."""
import json
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.artefacts.provenance import DamagedArtefactError, fingerprint, write_provenance
from dataflex_rl.records.package_versions import package_versions
from dataflex_rl.records.run_records import (PROVENANCE_COLUMNS, RECORD_COLUMNS, collect_records, records_frame,
                                 summarise_items)
from dataflex_rl.records.imported import import_released_runs, load_records

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"

def test_package_versions_are_compact_json_from_the_installed_distributions():
    text = package_versions(["pandas", "surely-not-an-installed-package"])
    assert text == json.dumps({"pandas": pd.__version__, "surely-not-an-installed-package": None},
                              separators=(",", ":"))
    assert " " not in package_versions()
    assert set(json.loads(package_versions())) == {"torch", "transformers", "dataflex-rl", "reasoning-gym",
                                                   "math-verify"}


def _items(correct):
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(len(correct))], "response": "a",
                         "length": 4, "correct": correct, "parsed": True})


def _score_sources(tmp_path):
    """Score files with provenance records whose settings are the slices their jobs would hold."""
    sources = []
    for seed, correct in ((1, [1, 0]), (None, [0, 0])):
        method = "soft" if seed else "untrained"
        for bench in ("basic_arithmetic", "syllogism"):
            path = tmp_path / f"{method}{seed}{bench}.parquet"
            _items(correct).to_parquet(path)
            settings = {"benchmark": bench, "evaluation.max_new_tokens": 4 if seed else 5,
                        **({"seed": seed, "training.steps": 3} if seed else {})}
            write_provenance(tmp_path / f"{path.stem}.provenance.json", settings, [path])
            sources.append({"path": str(path), "provenance": str(tmp_path / f"{path.stem}.provenance.json"),
                            "model": "m", "method": method, "seed": seed, "benchmark": bench})
    return sources


def test_collect_records_copies_each_scores_fingerprint_and_steps(tmp_path):
    versions = package_versions(["pandas"])
    records = collect_records(_score_sources(tmp_path), versions=versions)
    assert list(records.columns) == list(RECORD_COLUMNS)
    for row in records.itertuples():
        expected = {"benchmark": row.benchmark, "evaluation.max_new_tokens": 4 if row.method == "soft" else 5,
                    **({"seed": 1, "training.steps": 3} if row.method == "soft" else {})}
        assert row.fingerprint == fingerprint(expected)
    assert records.set_index("method")["steps"].to_dict() == {"soft": 3, "untrained": 0}
    # every answer is 4 tokens long: at the trained runs' cap of 4 (cut), under the base's cap of 5 (ended)
    assert records.set_index("method")["cut_share"].to_dict() == {"soft": 1.0, "untrained": 0.0}
    assert (records["package_versions"] == versions).all()
    path = tmp_path / "records.parquet"
    records.to_parquet(path, index=False)
    pd.testing.assert_frame_equal(load_records(path), records)


def test_records_are_never_built_from_a_score_that_is_not_the_one_its_job_wrote(tmp_path):
    """Tampering: a score file replaced after its job recorded it (here, by another run's) is refused, naming it,
    instead of being recorded under the fingerprint of the score it replaced."""
    sources = _score_sources(tmp_path)
    Path(sources[0]["path"]).write_bytes(Path(sources[2]["path"]).read_bytes())
    with pytest.raises(DamagedArtefactError, match=f"a score file is not the one its job wrote:\n  {sources[0]['path']}"):
        collect_records(sources)


def _row(seed, **provenance):
    return summarise_items(_items([1, 0]), model="t", method="baseline", seed=seed, benchmark="b", domain="math",
                           steps=1, **provenance)


@pytest.mark.parametrize("provenance, message", [
    ({"fingerprint": "abc"}, "fingerprint must be 64"),
    ({"fingerprint": "A" * 64}, "fingerprint must be 64"),
    ({"package_versions": "torch 2.1"}, "package_versions must be a JSON object"),
    ({"package_versions": '{"torch": 2}'}, "package_versions must be a JSON object"),
])
def test_validate_refuses_malformed_provenance(provenance, message):
    with pytest.raises(ValueError, match=message):
        records_frame([_row(1, **provenance)])


def test_validate_refuses_package_versions_that_vary_within_a_run():
    rows = [_row(1, package_versions='{"torch":"1"}'), {**_row(1, package_versions='{"torch":"2"}'), "benchmark": "c"}]
    with pytest.raises(ValueError, match="package_versions differs between the benchmarks of run 't/baseline/seed1'"):
        records_frame(rows)
    # each benchmark's score has a fingerprint of its own
    records_frame([_row(1, fingerprint="a" * 64), {**_row(1, fingerprint="b" * 64), "benchmark": "c"}])


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_a_table_lacking_columns_is_refused_naming_them(tmp_path, suffix):
    lacking = records_frame([_row(1), _row(2)]).drop(columns=[*PROVENANCE_COLUMNS, "mean_chars", "seed"])
    path = tmp_path / f"records.{suffix}"
    lacking.to_parquet(path, index=False) if suffix == "parquet" else lacking.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"records lack columns \['seed', 'mean_chars', 'fingerprint', "
                                         r"'package_versions'\]"):
        load_records(path)


@pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")
def test_imported_released_records_have_no_provenance():
    records = import_released_runs(RELEASED)
    assert records[list(PROVENANCE_COLUMNS)].isna().all().all()
    assert list(records.columns[:len(RECORD_COLUMNS)]) == list(RECORD_COLUMNS)
    assert records["cut_share"].isna().all()
