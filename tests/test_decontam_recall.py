"""Decontamination recall on planted copies of real and procedural benchmark items, one set per edit kind (formatting
markup included), and false hits on template siblings (other numbers: other problems), bare and in markup, and on an
unrelated training corpus.

The run goes through decontaminate_files, and the figures are read back from its audit JSON (`per_source`: the planted
rows' source is their edit kind), so the audit of this test run reports recall and false hits per edit kind.
"""
import json

import pandas as pd
import pytest

from dataflex_rl.corpus.decontam import decontaminate_files
from dataflex_rl.corpus.build import build_corpus
from planted_copies import (EDITS, MARKUP, PROCEDURAL_SOURCES, SHARED, SHARED_FILES, planted, procedural_items,
                            real_items, siblings)

THRESHOLD = 0.8  # the default study's


@pytest.fixture(scope="module")
def items():
    return {"real": real_items(), "procedural": procedural_items(100)}


def _audit(tmp_path, corpus: pd.DataFrame, benchmarks: pd.DataFrame) -> dict:
    corpus.to_parquet(tmp_path / "corpus.parquet")
    benchmarks.to_parquet(tmp_path / "benchmarks.parquet")
    decontaminate_files(tmp_path / "corpus.parquet", [tmp_path / "benchmarks.parquet"], tmp_path / "clean.parquet",
                        tmp_path / "decontamination.json", threshold=THRESHOLD)
    return json.loads((tmp_path / "decontamination.json").read_text())


def test_recall_per_edit_kind_and_false_hits_on_siblings(tmp_path, items):
    planted_sets = [planted(frame, kind).assign(source=f"{name} {kind}") for name, frame in items.items()
                    for kind in EDITS]
    sibling_rows = siblings(items["procedural"], 200).assign(source="sibling")
    marked_up = pd.concat([planted(sibling_rows.iloc[k::len(MARKUP)], kind) for k, kind in enumerate(MARKUP)],
                          ignore_index=True).assign(source="sibling in markup")
    corpus = pd.concat(planted_sets + [sibling_rows, marked_up], ignore_index=True)
    audit = _audit(tmp_path, corpus, pd.concat(items.values(), ignore_index=True))

    share = {source: counts["removed"] / counts["rows"] for source, counts in audit["per_source"].items()}
    print("\n".join(f"{source:32s} {counts['rows']:5d} rows  removed {share[source]:.3f}"
                    for source, counts in audit["per_source"].items()))
    assert set(share) == {f"{name} {kind}" for name in items for kind in EDITS} | {"sibling", "sibling in markup"}
    assert audit["per_source"]["sibling"]["rows"] == audit["per_source"]["sibling in markup"]["rows"] >= 1000
    assert {source: s for source, s in share.items() if not source.startswith("sibling") and s < 0.95} == {}
    assert share["sibling"] <= 0.01 and share["sibling in markup"] <= 0.01


def test_no_false_hits_on_unrelated_prompts(tmp_path, items):
    """A training corpus of the procedural generators against the real benchmarks, and the real items against the
    procedural items: nothing in common, nothing removed, but for one real leak. The molar-mass generator asks "What is
    the molar mass of H2O in g/mol?", which is the chemistry fixture's "What is the molar mass of water (H2O) in
    g/mol?" with a word dropped: the same problem, with or without its options."""
    corpus, _ = build_corpus(PROCEDURAL_SOURCES, 600, seed=5)
    leaks = corpus["prompt"].str.startswith("What is the molar mass of H2O in g/mol?")
    audit = _audit(tmp_path, corpus, items["real"])
    print(audit["per_source"])
    assert audit["counts"]["corpus_rows"] >= 1500 and leaks.sum() >= 1
    assert audit["counts"]["removed"] == audit["per_benchmark"]["MMLU-Pro-chemistry"] == leaks.sum()
    assert set(pd.read_parquet(tmp_path / "clean.parquet")["id"]) == set(corpus.loc[~leaks, "id"])

    real = items["real"].assign(source="real", answer_format="int")
    audit = _audit(tmp_path, real, items["procedural"])
    assert audit["counts"]["corpus_rows"] == len(real) and audit["counts"]["removed"] == 0
    # the fixtures alone hold a few dozen items; with the shared public copies beside the repository, thousands
    assert len(real) >= (2000 if any((SHARED / file).exists() for file in SHARED_FILES.values()) else 30)
