"""A benchmark split into validation and test items for prompt selections that draw their validation prompts from it
(`validation: {benchmark: <name>}`, dataflex_rl.prompt_selection.benchmark_split): which items the study holds out,
that every run is recorded on the test items alone, and that the runs of other methods keep their jobs."""
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dataflex_rl.artefacts import layout
from dataflex_rl.artefacts.provenance import write_provenance
from dataflex_rl.prompt_selection.benchmark_split import validation_item_ids, validation_positions
from dataflex_rl.records.run_records import collect_records
from dataflex_rl.study.files import StudyFiles
from dataflex_rl.study.resolved import Study

REPO = Path(__file__).resolve().parents[1]


def _study(**methods) -> Study:
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["methods"] = {"baseline": {"policy": "baseline"}, **methods}
    return Study.from_config(config)


GRADALIGN_ON_GCD = {"policy": "gradalign", "control": "baseline",
                    "params": {"validation": {"benchmark": "gcd"}, "validation_size": 20}}


def test_the_study_holds_the_drawn_items_out_of_that_benchmark_alone_and_no_corpus_row():
    study = _study(gradalign=GRADALIGN_ON_GCD, gradalign_val5={**GRADALIGN_ON_GCD, "params": {
        "validation": {"benchmark": "gcd"}, "validation_size": 5, "validation_seed": 2}})
    assert study.benchmark_validation_draws("gcd") == [[5, 2], [20, 0]]
    assert study.benchmark_validation_draws("chain_sum") == []
    model = next(iter(study.models))
    assert study.validation_draws(model, None) == []  # no corpus row is held out of any run
    sources = StudyFiles(study, list(study.benchmarks.names), []).record_sources()
    split = {"items": "results/benchmarks/gcd.parquet", "draws": [[5, 2], [20, 0]]}
    assert all(source.get("validation_split") == (split if source["benchmark"] == "gcd" else None)
               for source in sources)
    run = next(run for run in study.runs if run.method == "gradalign")
    assert study.validation_files(run) == [layout.benchmark_items("gcd")]  # the train job reads gcd's items
    assert study.train_slice(run)["methods.gradalign.params.validation.benchmarks.seed"] == 1000


def test_the_other_methods_runs_keep_the_jobs_of_a_study_without_the_split():
    """Unlike validation prompts drawn from the corpus, a benchmark's items change no other run's training."""
    with_split, without = _study(gradalign=GRADALIGN_ON_GCD), _study()
    for run in without.runs:
        assert with_split.train_slice(run) == without.train_slice(run)
        assert with_split.train_job(run) == without.train_job(run)


def test_a_draw_leaving_no_test_item_is_refused_naming_the_fix():
    assert len(validation_positions("gcd", 8, [[7, 0]])) == 7
    with pytest.raises(ValueError, match="a validation draw of 8 items leaves none of its 8 items to test; lower "
                                         "validation_size below 8"):
        validation_positions("gcd", 8, [[8, 0]])


def test_the_held_out_items_are_the_union_of_the_draws():
    ids = [f"gcd-{i}" for i in range(40)]
    small, large = validation_item_ids("gcd", ids, [[3, 1]]), validation_item_ids("gcd", ids, [[10, 0]])
    assert len(small) == 3 and len(large) == 10 and small | large <= set(ids)
    assert validation_item_ids("gcd", ids, [[3, 1], [10, 0]]) == small | large


def test_the_records_score_a_split_benchmark_on_its_test_items_alone(tmp_path):
    """Each run's score file solves every held-out item and two of the test items: its record must count the test
    items alone, n = 10 − |held out| and 2 solved, while an unsplit benchmark counts all 10."""
    ids = [f"gcd-{i}" for i in range(10)]
    pd.DataFrame({"benchmark": "gcd", "id": ids}).to_parquet(tmp_path / "gcd.parquet")
    draws = [[3, 0], [4, 7]]
    held_out = validation_item_ids("gcd", ids, draws)
    test = [i for i in ids if i not in held_out]
    correct = [int(i in held_out or i in test[:2]) for i in ids]
    sources = []
    for benchmark in ("gcd", "chain_sum"):
        path = tmp_path / f"{benchmark}.scores.parquet"
        pd.DataFrame({"prompt_id": ids, "response": "a", "length": 4, "correct": correct,
                      "parsed": True}).to_parquet(path)
        provenance = tmp_path / f"{benchmark}.provenance.json"
        write_provenance(provenance, {"benchmark": benchmark, "seed": 1, "training.steps": 3}, [path])
        split = {"validation_split": {"items": str(tmp_path / "gcd.parquet"), "draws": draws}}
        sources.append({"path": str(path), "provenance": str(provenance), "model": "m", "method": "gradalign",
                        "seed": 1, "benchmark": benchmark, **(split if benchmark == "gcd" else {})})
    records = collect_records(sources).set_index("benchmark")
    assert records.loc["gcd", "n"] == 10 - len(held_out) and records.loc["gcd", "correct"] == 2
    assert records.loc["gcd", "score"] == pytest.approx(2 / (10 - len(held_out)))
    assert records.loc["chain_sum", "n"] == 10 and records.loc["chain_sum", "correct"] == len(held_out) + 2


def test_drawn_items_that_are_another_benchmarks_items_are_refused_and_undrawn_ones_are_not():
    from dataflex_rl.study.config_checks import _validation_benchmark_errors

    study = _study(gradalign=GRADALIGN_ON_GCD)  # 20 of gcd's 100 items, validation_seed 0
    gcd = pd.DataFrame({"benchmark": "gcd", "id": [f"gcd-{i}" for i in range(100)],
                        "prompt": [f"What is the GCD of {i} and {i + 6}?" for i in range(100)]})
    drawn = sorted(validation_positions("gcd", 100, [[20, 0]]))
    undrawn = next(i for i in range(100) if i not in drawn)

    def errors(shared: int) -> list[str]:
        other = pd.DataFrame({"benchmark": "chain_sum", "id": ["cs-0", "cs-1"],
                              "prompt": ["  " + gcd["prompt"][shared].upper(), "What is 2 + 2?"]})
        return _validation_benchmark_errors(study, "gradalign", study.methods["gradalign"],
                                            {"gcd": gcd, "chain_sum": other})

    assert errors(drawn[0]) == [
        f"methods.gradalign.params.validation: 1 validation item(s) drawn from benchmark 'gcd' are or hold test items "
        "(the same id, or a prompt decontamination removes from the corpus: the same normalised text, or the item "
        f"inside a template at decontamination.threshold 0.8), the first row 'gcd-{drawn[0]}' = benchmark 'chain_sum' "
        "item 'cs-0'; use "
        "another validation benchmark or seed — a validation prompt that is also scored measures the selection on its "
        "own target"]
    assert errors(undrawn) == []  # an item left in gcd's test split: no validation prompt is scored
