"""Provenance columns of the records: the config hash, the package versions; incomplete and imported tables."""
import hashlib
import json
from importlib import metadata
from pathlib import Path

import pandas as pd
import pytest

from dataflex_rl.records import (PROVENANCE_COLUMNS, RECORD_COLUMNS, collect_records, config_hash, package_versions,
                                 records_frame, summarise_items)
from dataflex_rl.records_import import import_released_runs, load_records

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"

CONFIG = {
    "study": "s",
    "prompt_template": "{question}\nAnswer:",
    "models": {"m": {"backend": "embedded"}, "other": {"backend": "verl"}},
    "corpus": {"seed": 1},
    "benchmarks": {"names": ["gsm8k"]},
    "training": {"steps": 3},
    "methods": {"baseline": {"policy": "baseline"}, "soft": {"policy": "softmax", "control": "baseline"}},
    "seeds": [1, 2],
}


def test_config_hash_is_sha256_of_the_documented_canonical_json():
    # Written out by hand: sorted keys, no spaces, sections absent from the config are null.
    trained = ('{"benchmarks":{"names":["gsm8k"]},"calibration":null,"corpus":{"seed":1},"decontamination":null,'
               '"evaluation":null,"method":{"control":"baseline","policy":"softmax"},"model":{"backend":"embedded"},'
               '"prompt_template":"{question}\\nAnswer:","training":{"steps":3}}')
    assert config_hash(CONFIG, "m", "soft") == hashlib.sha256(trained.encode()).hexdigest()
    untrained = ('{"benchmarks":{"names":["gsm8k"]},"evaluation":null,"model":{"backend":"embedded"},'
                 '"prompt_template":"{question}\\nAnswer:"}')
    assert config_hash(CONFIG, "m", "untrained") == hashlib.sha256(untrained.encode()).hexdigest()


def test_config_hash_ignores_key_order_and_other_runs_sections():
    reordered = json.loads(json.dumps(CONFIG))
    reordered["methods"]["soft"] = {"control": "baseline", "policy": "softmax"}
    reordered["models"]["other"] = {"backend": "embedded"}  # another model's entry
    reordered["methods"]["new"] = {"policy": "per"}  # another method
    reordered["seeds"] = [1, 2, 3]  # the seed is in the run id, not the hash
    assert config_hash(reordered, "m", "soft") == config_hash(CONFIG, "m", "soft")
    changed = json.loads(json.dumps(CONFIG))
    changed["training"]["steps"] = 4
    assert config_hash(changed, "m", "soft") != config_hash(CONFIG, "m", "soft")
    assert config_hash(changed, "m", "untrained") == config_hash(CONFIG, "m", "untrained")


def test_package_versions_are_compact_json_from_the_installed_distributions():
    text = package_versions(["pandas", "surely-not-an-installed-package"])
    assert text == json.dumps({"pandas": pd.__version__, "surely-not-an-installed-package": None},
                              separators=(",", ":"))
    assert " " not in package_versions()
    assert set(json.loads(package_versions())) == {"torch", "transformers", "dataflex-rl", "reasoning-gym",
                                                   "math-verify", "datasketch"}


def _items(correct):
    return pd.DataFrame({"prompt_id": [f"p{i}" for i in range(len(correct))], "response": "a",
                         "length": 4, "correct": correct, "parsed": True})


def test_collect_records_stamps_hash_and_versions(tmp_path):
    sources = []
    for seed, correct in ((1, [1, 0]), (None, [0, 0])):
        method = "soft" if seed else "untrained"
        for bench in ("basic_arithmetic", "syllogism"):
            path = tmp_path / f"{method}{seed}{bench}.parquet"
            _items(correct).to_parquet(path)
            sources.append({"path": str(path), "model": "m", "method": method, "seed": seed, "benchmark": bench,
                            "config_hash": config_hash(CONFIG, "m", method)})
    versions = package_versions(["pandas"])
    records = collect_records(sources, steps=3, versions=versions)
    assert list(records.columns) == list(RECORD_COLUMNS)
    trained = records[records["method"] == "soft"]
    assert set(trained["config_hash"]) == {config_hash(CONFIG, "m", "soft")}
    assert (records["package_versions"] == versions).all()
    path = tmp_path / "records.parquet"
    records.to_parquet(path, index=False)
    pd.testing.assert_frame_equal(load_records(path), records)


def _row(seed, **provenance):
    return summarise_items(_items([1, 0]), model="t", method="baseline", seed=seed, benchmark="b", domain="math",
                           steps=1, **provenance)


@pytest.mark.parametrize("provenance, message", [
    ({"config_hash": "abc"}, "config_hash must be 64"),
    ({"config_hash": "A" * 64}, "config_hash must be 64"),
    ({"package_versions": "torch 2.1"}, "package_versions must be a JSON object"),
    ({"package_versions": '{"torch": 2}'}, "package_versions must be a JSON object"),
])
def test_validate_refuses_malformed_provenance(provenance, message):
    with pytest.raises(ValueError, match=message):
        records_frame([_row(1, **provenance)])


def test_validate_refuses_provenance_that_varies_within_a_run():
    rows = [_row(1, config_hash="a" * 64), {**_row(1, config_hash="b" * 64), "benchmark": "c"}]
    with pytest.raises(ValueError, match="config_hash differs between the benchmarks of run 't/baseline/seed1'"):
        records_frame(rows)
    records_frame([_row(1, config_hash="a" * 64), {**_row(1, config_hash="a" * 64), "benchmark": "c"}])


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_a_table_lacking_columns_is_refused_naming_them(tmp_path, suffix):
    lacking = records_frame([_row(1), _row(2)]).drop(columns=[*PROVENANCE_COLUMNS, "mean_chars", "seed"])
    path = tmp_path / f"records.{suffix}"
    lacking.to_parquet(path, index=False) if suffix == "parquet" else lacking.to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"records lack columns \['seed', 'mean_chars', 'config_hash', "
                                         r"'package_versions'\]"):
        load_records(path)


@pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")
def test_imported_released_records_have_no_provenance():
    records = import_released_runs(RELEASED)
    assert records[list(PROVENANCE_COLUMNS)].isna().all().all()
    assert list(records.columns[:len(RECORD_COLUMNS)]) == list(RECORD_COLUMNS)


def test_records_rule_stamps_each_runs_config_hash_and_the_versions(tmp_path):
    """The `records` rule alone (no rule that could train is allowed) on stand-in score files of the default config;
    the hash is recomputed here from the config file by the documented recipe."""
    import subprocess
    import sys

    import yaml

    repo = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((repo / "config/config.yaml").read_text())
    runs = ["untrained"] + [f"{m}/seed{s}" for m in config["methods"] for s in config["seeds"]]
    for run in runs:
        for bench in config["benchmarks"]["names"]:
            path = tmp_path / f"results/scores/tiny-qwen2/{run}/{bench}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            _items([1, 0, 1]).to_parquet(path)
    result = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"),
                             "results/records/records.parquet", "--allowed-rules", "records", "--cores", "1",
                             "--configfile", str(repo / "config/config.yaml"), "--directory", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    records = load_records(tmp_path / "results/records/records.parquet")
    assert len(records) == len(runs) * 12

    def expected(method):
        picked = {"model": config["models"]["tiny-qwen2"], "benchmarks": config["benchmarks"],
                  "evaluation": config["evaluation"], "prompt_template": config["prompt_template"]}
        if method != "untrained":
            picked.update(method=config["methods"][method], corpus=config["corpus"], training=config["training"],
                          decontamination=config["decontamination"], calibration=config["calibration"])
        text = json.dumps(picked, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    for method, hashes in records.groupby("method")["config_hash"]:
        assert set(hashes) == {expected(method)}, method
    versions = json.loads(records["package_versions"].iloc[0])
    assert records["package_versions"].nunique() == 1
    assert versions["dataflex-rl"] == metadata.version("dataflex-rl")
    assert versions["datasketch"] == metadata.version("datasketch")
