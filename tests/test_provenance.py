"""Fingerprints, provenance records, damaged artefacts and resumable-state keys; which settings each job's slice holds.

The expected fingerprint is computed here from hand-written canonical JSON; the slices are checked key by key against
the config they come from."""
import copy
import hashlib
from pathlib import Path

import pytest
import yaml

from dataflex_rl.study.jobs import training_state
from dataflex_rl.artefacts.provenance import (DamagedArtefactError, StaleArtefactError, artefact_digest, damage,
                                              fingerprint, plain_input, read_provenance, refuse_other_settings,
                                              settings_differences, verified_input, write_provenance)
from dataflex_rl.study.resolved import Run, Study

from config_edits import set_key

REPO = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((REPO / "config/config.yaml").read_text())


def study(**changes):
    """The default study with dotted-key changes, e.g. study(**{"training.learning_rate": 1e-4})."""
    config = copy.deepcopy(CONFIG)
    for key, value in changes.items():
        set_key(config, key, value)
    return Study.from_config(config)


def test_fingerprint_is_sha256_of_the_canonical_json():
    settings = {"training.learning_rate": 0.0003, "corpus.sources": ["gcd", "aiw"], "evaluation.temperature": 0.0}
    text = '{"corpus.sources":["gcd","aiw"],"evaluation.temperature":0.0,"training.learning_rate":0.0003}'
    assert fingerprint(settings) == hashlib.sha256(text.encode()).hexdigest()
    assert fingerprint(dict(reversed(list(settings.items())))) == fingerprint(settings)


def test_runtime_facts_sit_beside_the_settings_outside_the_fingerprint(tmp_path):
    """What a job ran with that its settings do not fix (a verl run's attention kernel) is recorded, changes no
    fingerprint, and leaves a record without it as it was."""
    (tmp_path / "metrics.parquet").write_bytes(b"m")
    plain = write_provenance(tmp_path / "plain.json", {"seed": 1}, [tmp_path / "metrics.parquet"], runtime={})
    assert "runtime" not in plain
    record = write_provenance(tmp_path / "provenance.json", {"seed": 1}, [tmp_path / "metrics.parquet"],
                              runtime={"attention": "sdpa"})
    assert read_provenance(tmp_path / "provenance.json")["runtime"] == {"attention": "sdpa"}
    assert record["fingerprint"] == plain["fingerprint"] == fingerprint({"seed": 1})
    assert {k: v for k, v in record.items() if k != "runtime"} == plain


def test_a_record_lists_each_output_file_and_a_damaged_one_is_named(tmp_path):
    weights, metrics = tmp_path / "weights.pt", tmp_path / "metrics.parquet"
    weights.write_bytes(b"w" * 1000)
    metrics.write_bytes(b"m" * 10)
    record = write_provenance(tmp_path / "provenance.json", {"seed": 1}, [weights, metrics])
    assert record == read_provenance(tmp_path / "provenance.json")
    assert record["outputs"] == {"weights.pt": hashlib.sha256(b"w" * 1000).hexdigest(),
                                 "metrics.parquet": hashlib.sha256(b"m" * 10).hexdigest()}
    assert damage(record, tmp_path / "provenance.json") == []
    verified = verified_input(weights, tmp_path / "provenance.json")
    assert verified["fingerprint"] == fingerprint({"seed": 1})
    assert verified["sha256"] == hashlib.sha256(b"w" * 1000).hexdigest()

    weights.write_bytes(b"w" * 500)  # truncated in place
    (problem,) = damage(record, tmp_path / "provenance.json")
    assert problem.startswith(f"{weights}: sha256 ") and "damaged or changed after it was written" in problem
    with pytest.raises(DamagedArtefactError, match=f"damaged input artefact:\n  {weights}: sha256"):
        verified_input(weights, tmp_path / "provenance.json")
    metrics.unlink()
    assert f"{metrics}: missing (recorded in {tmp_path / 'provenance.json'})" in damage(record,
                                                                                       tmp_path / "provenance.json")


def test_an_artefact_without_its_record_is_refused_with_the_fix(tmp_path):
    with pytest.raises(DamagedArtefactError, match="no provenance record; the artefact beside it was not finished"):
        verified_input(tmp_path / "weights.pt", tmp_path / "provenance.json")


def test_one_artefact_of_a_record_is_verified_without_reading_the_others(tmp_path):
    """A run's metrics, checked alone (`whole_record=False`): a damaged model beside them does not matter, an edited
    metrics file does, and a file the record does not list is refused."""
    model, metrics = tmp_path / "model", tmp_path / "metrics.parquet"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w" * 100)
    metrics.write_bytes(b"m" * 10)
    record = tmp_path / "provenance.json"
    write_provenance(record, {"seed": 1}, [model, metrics])
    (model / "weights.bin").write_bytes(b"w" * 50)
    assert verified_input(metrics, record, whole_record=False)["sha256"] == hashlib.sha256(b"m" * 10).hexdigest()
    with pytest.raises(DamagedArtefactError, match="weights.bin: sha256"):
        verified_input(metrics, record)
    (line,) = damage(read_provenance(record), record, artefact=model)
    assert line.startswith(f"{model / 'weights.bin'}: sha256 ")
    metrics.write_bytes(b"M" * 10)
    with pytest.raises(DamagedArtefactError, match=f"{metrics}: sha256 .* recorded in {record}"):
        verified_input(metrics, record, whole_record=False)
    with pytest.raises(DamagedArtefactError, match=f"{tmp_path / 'other.parquet'}: not among the outputs recorded"):
        verified_input(tmp_path / "other.parquet", record, whole_record=False)


@pytest.mark.parametrize("text,lacking", [('{"fingerprint": "ab', "unreadable provenance record"),
                                          ('{"fingerprint": "0"}', r"lacks settings, outputs"),
                                          ('[1, 2]', r"lacks fingerprint, settings, outputs"),
                                          ('{"fingerprint": "0", "settings": {}, "outputs": []}', "an outputs map")])
def test_a_record_that_is_not_one_is_refused_naming_it(tmp_path, text, lacking):
    (tmp_path / "provenance.json").write_text(text)
    with pytest.raises(DamagedArtefactError, match=f"{tmp_path / 'provenance.json'}: .*{lacking}"):
        read_provenance(tmp_path / "provenance.json")


def test_a_directory_artefact_records_its_files_but_not_the_record_itself(tmp_path):
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "weights.bin").write_bytes(b"abc")
    record = write_provenance(model / "provenance.json", {}, [model])
    assert sorted(record["outputs"]) == ["config.json", "sub/weights.bin"]
    # the digest of a verified directory, from the digests checked on the way, is the one computed afresh
    files = b"".join(name.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode()
                     for name, data in (("config.json", b"{}"), ("sub/weights.bin", b"abc")))
    assert verified_input(model, model / "provenance.json")["sha256"] == hashlib.sha256(files).hexdigest() \
        == artefact_digest(model)


def test_training_state_is_kept_per_configuration_and_input(tmp_path):
    corpus = tmp_path / "corpus.parquet"
    corpus.write_bytes(b"rows")
    inputs = {"corpus": plain_input(corpus)}
    settings = study().train_slice(Run("tiny-qwen2", "baseline", 1, steps=80))
    here = training_state(tmp_path / "state", settings, inputs)
    assert here == training_state(tmp_path / "state", dict(settings), inputs)  # unchanged: resumes
    longer = {**settings, "training.steps": 1000}
    assert training_state(tmp_path / "state", longer, inputs) == here  # extending a run resumes it
    other_lr = {**settings, "training.learning_rate": 1e-4}
    assert training_state(tmp_path / "state", other_lr, inputs) != here  # a changed run starts afresh
    corpus.write_bytes(b"other rows")
    assert training_state(tmp_path / "state", settings, {"corpus": plain_input(corpus)}) != here


def test_each_job_slice_holds_what_its_result_depends_on():
    base = study()
    lr = study(**{"training.learning_rate": 1e-4})
    softmax = Run("tiny-qwen2", "softmax", 2, steps=80)
    assert lr.train_slice(softmax) != base.train_slice(softmax)
    assert lr.base_slice("tiny-qwen2") == base.base_slice("tiny-qwen2")
    assert lr.score_slice("tiny-qwen2", "untrained", "gcd") == base.score_slice("tiny-qwen2", "untrained", "gcd")
    assert lr.score_slice("tiny-qwen2", softmax.name, "gcd")["training.learning_rate"] == 1e-4

    batch = study(**{"evaluation.batch_size": 7})
    assert batch.train_slice(softmax) == base.train_slice(softmax)
    assert batch.score_slice("tiny-qwen2", softmax.name, "gcd")["evaluation.batch_size"] == 7

    neutral = [study(**{"training.checkpoint_every": 5}), study(**{"evaluation.seed": 9}),  # greedy: no sampling seed
               study(**{"methods.softmax.control": "static"}), study(**{"calibration.min_base_parse_rate": 0.5}),
               study(**{"evaluation.min_parse_rate": 0.9}), study(**{"methods.difffilter.params": {"high": 0.8}})]
    for other in neutral:  # difffilter's low defaults to the 0.2 the default config writes out
        for model, run in base.scored_runs():
            for bench in base.benchmarks.names:
                assert other.score_slice(model, run, bench) == base.score_slice(model, run, bench)
    sampled = study(**{"evaluation.temperature": 0.7, "evaluation.seed": 9})
    assert sampled.score_slice("tiny-qwen2", "untrained", "gcd")["evaluation.seed"] == 9


def test_a_setting_written_another_way_gives_every_job_the_same_slice_and_arguments():
    """An integer where a float is declared (a training setting, a policy parameter, a model's warm-up), the seeds in
    another order, and benchmarks.hub_fallback on generated benchmarks: each job's slice and arguments are those of the
    default config, so nothing replans (test_workflow.py replans them for real). A benchmark with a hub source keeps
    the setting in its slice, and an integer setting stays an integer."""
    def jobs(s):
        return ([s.train_slice(run) for run in s.runs] + [s.train_job(run) for run in s.runs]
                + [s.score_slice(model, run, bench) for model, run in s.scored_runs() for bench in s.benchmarks.names]
                + [s.base_slice("tiny-qwen2"), s.base_job("tiny-qwen2")])

    base = study()
    for other in (study(**{"training.temperature": 1}), study(**{"methods.softmax.params.temperature": 1}),
                  study(seeds=[3, 1, 2]), study(**{"benchmarks.hub_fallback": True})):
        assert repr(jobs(other)) == repr(jobs(base))
    for key in ("training.learning_rate", "models.tiny-qwen2.warmup.learning_rate", "methods.difffilter.params.low"):
        assert repr(jobs(study(**{key: 1}))) == repr(jobs(study(**{key: 1.0}))), key
    assert study(**{"training.learning_rate": 1}).train_slice(base.runs[0])["training.learning_rate"] == 1.0
    assert type(study(**{"training.steps": 7}).train_slice(base.runs[0])["training.steps"]) is int

    hub = study(**{"benchmarks.hub_fallback": True, "benchmarks.names": ["gcd", "GSM8K"], "benchmarks.files": {}})
    assert hub.benchmark_slice("GSM8K")["benchmarks.hub_fallback"] is True
    assert hub.benchmark_slice("gcd")["benchmarks.hub_fallback"] is False


def test_token_caps_are_gates_in_no_slice_while_character_caps_change_the_corpus():
    """A token cap passes texts within it unchanged (dataflex_rl.corpus.token_caps), so changing one must rerun no
    finished job: every slice stays as it was (a score slice holds every upstream job's). A character cap quarantines
    rows when the corpus or a benchmark is built: it is in those slices, and so in every score slice downstream."""
    base = study()
    gates = [study(**{f"data_validation.{section}.{cap}": 40}) for section in ("corpus", "benchmarks")
             for cap in ("max_prompt_tokens", "max_answer_tokens")]
    for other in gates:
        for model, run in base.scored_runs():
            for bench in base.benchmarks.names:
                assert other.score_slice(model, run, bench) == base.score_slice(model, run, bench)
    corpus_chars = study(**{"data_validation.corpus.max_answer_chars": 1999})
    assert corpus_chars.corpus_slice()["data_validation.corpus.max_answer_chars"] == 1999
    assert corpus_chars.score_slice("tiny-qwen2", "untrained", "gcd") != base.score_slice("tiny-qwen2", "untrained",
                                                                                          "gcd")
    bench_chars = study(**{"data_validation.benchmarks.max_prompt_chars": 500})
    assert bench_chars.benchmark_slice("gcd")["data_validation.benchmarks.max_prompt_chars"] == 500


def test_a_slice_names_config_keys_with_defaults_filled():
    difffilter = Run("tiny-qwen2", "difffilter", 3, steps=80)
    train = study().train_slice(difffilter)
    assert train["seed"] == 3 and train["methods.difffilter.params.low"] == 0.2
    assert train["models.tiny-qwen2.shape.hidden_size"] == CONFIG["models"]["tiny-qwen2"]["shape"]["hidden_size"]
    assert train["decontamination.threshold"] == CONFIG["decontamination"]["threshold"]
    assert "training.checkpoint_every" not in train and "methods.difffilter.control" not in train
    no_decontamination = copy.deepcopy(CONFIG)
    del no_decontamination["decontamination"]
    assert Study.from_config(no_decontamination).train_slice(difffilter) == train  # the defaults


def test_a_model_recorded_with_other_settings_is_refused_naming_each_key(tmp_path):
    """The comparison a score or merge job makes of its model's record with its own slice (a superset of it): a
    differing value and a key the slice lacks are each named, recorded vs expected; extra slice keys are not."""
    recorded = {"training.learning_rate": 0.0001, "seed": 1, "corpus.sources": ["gcd", "aiw"]}
    slice_ = {"training.learning_rate": 0.01, "corpus.sources": ["gcd", "aiw"], "evaluation.temperature": 0.0}
    assert settings_differences(recorded, slice_) == ["seed: recorded 1, expected (no such key)",
                                                      "training.learning_rate: recorded 0.0001, expected 0.01"]
    assert settings_differences(recorded, {**slice_, "seed": 1, "training.learning_rate": 1e-4}) == []
    assert settings_differences({"corpus.sources": ["gcd"]}, {"corpus.sources": ("gcd",)}) == []  # as JSON
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights").write_text("w")
    record = write_provenance(tmp_path / "provenance.json", recorded, [model])
    refuse_other_settings(model, tmp_path / "provenance.json", {**slice_, **recorded})
    with pytest.raises(StaleArtefactError) as refused:
        refuse_other_settings(model, tmp_path / "provenance.json", slice_)
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'provenance.json'}: the model was built with other settings")
    assert "training.learning_rate: recorded 0.0001, expected 0.01" in message
    assert f"snakemake -R {tmp_path / 'provenance.json'}" in message and "--touch" in message
    assert record["settings"] == recorded
