"""What each job of a study reads and waits for (dataflex_rl/study/files.py), the jobs planned again for damage and
stale settings (dataflex_rl/study/replans.py) and the backends' resource requests merged over a study's models
(dataflex_rl/study/rule_resources.py): the decisions rules/common.smk only looks up, each against paths written out by
hand from the layout (README: results/...)."""
import hashlib
import os
from pathlib import Path

import pytest
import yaml

from dataflex_rl.artefacts.provenance import write_provenance
from dataflex_rl.study.replans import Replans
from dataflex_rl.study.rule_resources import backend_resources
from dataflex_rl.study.resolved import Study
from dataflex_rl.study.files import StudyFiles

REPO = Path(__file__).resolve().parents[1]
RUN = "full/baseline/seed1/steps80"


def files_of(config_name: str, overlay: str | None = None) -> StudyFiles:
    config = yaml.safe_load((REPO / "config" / config_name).read_text())
    config.update(yaml.safe_load((REPO / "config" / overlay).read_text()) if overlay else {})
    study = Study.from_config(config)
    return StudyFiles(study, list(study.benchmarks.names), [])


@pytest.fixture
def in_empty_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_embedded_run_starts_from_the_built_base_and_is_scored_from_its_own_directory(in_empty_dir):
    files = files_of("config.yaml")
    model = "tiny-qwen2"
    assert files.base_model(model) == "results/models/tiny-qwen2"
    assert files.scored_model(model, "untrained") == "results/models/tiny-qwen2"
    assert files.scored_model_provenance(model, "untrained") == "results/models/tiny-qwen2/provenance.json"
    run = files.study.runs[0].name
    assert files.scored_model(model, run) == f"results/runs/tiny-qwen2/{run}/model"
    assert files.scored_model_provenance(model, run) == f"results/runs/tiny-qwen2/{run}/provenance.json"
    assert files.conda_env(model) == "../envs/cpu.yaml"
    # no merge: three artefacts per run; the base is a target of its own, so a lost one is built again
    assert len(files.run_outputs()) == 3 * len(files.study.runs)
    assert files.base_models() == ["results/models/tiny-qwen2"]
    assert "results/tables/embedded-default/provenance.json" in files.tables()  # a lost tables record is written again


def test_a_verl_run_loads_its_path_and_is_scored_from_its_merged_directory(in_empty_dir):
    files = files_of("paper.yaml")
    model = "qwen2.5-7b-base"
    run = files.study.runs[0].name
    assert files.base_model(model) == [] and files.base_models() == []
    assert files.scored_model(model, "untrained") == []
    assert files.scored_model_provenance(model, "untrained") is None
    assert files.scored_model(model, run) == f"results/runs/{model}/{run}/merged"
    assert files.scored_model_provenance(model, run) == f"results/runs/{model}/{run}/merged/provenance.json"
    assert files.conda_env(model) == "../envs/gpu.yaml"
    assert len(files.run_outputs()) == 4 * len(files.study.runs)


def test_training_waits_for_the_parse_gate_only_where_its_threshold_can_stop_it(in_empty_dir):
    """The default's min_base_parse_rate 0 cannot stop anything, so training waits only for the calibrations."""
    default = files_of("config.yaml")
    run = default.study.runs[0].name
    calibrations = [f"results/calibration/{b}.json" for b in default.benchmarks]
    assert default.training_gates("tiny-qwen2", run) == calibrations
    paper = files_of("paper.yaml")
    run = paper.study.runs[0].name
    gates = paper.training_gates("qwen2.5-7b-base", run)
    assert gates[-1] == "results/calibration/parse_gate/qwen2.5-7b-base.json"
    assert gates[:-1] == [f"results/calibration/{b}.json" for b in paper.benchmarks]


def test_a_finished_job_waits_for_no_lost_gate_but_a_gate_on_other_data_holds_it(in_empty_dir):
    files = files_of("config.yaml")
    benchmark = files.benchmarks[0]
    gate = Path(f"results/gates/quarantine/{benchmark}.json")
    assert files.calibration_gates(benchmark) == [str(gate)]  # a fresh study waits
    calibration = Path(f"results/calibration/{benchmark}.json")
    calibration.parent.mkdir(parents=True)
    calibration.write_text("{}")
    assert files.calibration_gates(benchmark) == []  # a lost report of a finished job holds nothing
    gate.parent.mkdir(parents=True)
    gate.write_text('{"data_fingerprint": "%s"}' % files.data_fingerprint(benchmark))
    assert files.calibration_gates(benchmark) == []
    gate.write_text('{"data_fingerprint": "another"}')  # counted other data: the job waits for the new count
    assert files.calibration_gates(benchmark) == [str(gate)]


def test_a_regime_run_trains_on_its_regime_corpus_and_a_longer_budget_waits_for_the_shorter(in_empty_dir):
    files = files_of("config.yaml", "campaigns/embedded.yaml")
    regime = "noise20_20pct_label_noise"
    assert files.training_corpus("tiny-qwen2", RUN) == "results/corpus/clean.parquet"
    assert files.training_corpus("tiny-qwen2", f"{regime}/baseline/seed1/steps80") == (
        f"results/corpus/regimes/{regime}/tiny-qwen2.parquet")
    assert files.previous_budget("tiny-qwen2", "full/baseline/seed1/steps160") == [
        f"results/runs/tiny-qwen2/{RUN}/provenance.json"]
    assert files.previous_budget("tiny-qwen2", RUN) == []


def test_each_score_is_held_to_its_own_slice_and_each_problem_said_once(in_empty_dir, capsys):
    files = files_of("config.yaml")
    study, forced = files.study, []
    replans = Replans(study, forced.extend)
    run = study.runs[0].name
    benchmarks = files.benchmarks[:2]
    outputs = files.score_outputs("tiny-qwen2", run, benchmarks)
    replans.rescored_when_stale("tiny-qwen2", run, benchmarks, outputs)
    assert forced == []  # nothing scored yet
    for benchmark in benchmarks:
        record = Path(f"results/scores/tiny-qwen2/{run}/{benchmark}.provenance.json")
        record.parent.mkdir(parents=True, exist_ok=True)
        write_provenance(record, study.score_slice("tiny-qwen2", run, benchmark), [])
    replans.rescored_when_stale("tiny-qwen2", run, benchmarks, outputs)
    assert forced == []
    write_provenance(f"results/scores/tiny-qwen2/{run}/{benchmarks[1]}.provenance.json", {"other": 1}, [])
    replans.rescored_when_stale("tiny-qwen2", run, benchmarks, outputs)
    replans.rescored_when_stale("tiny-qwen2", run, benchmarks, outputs)
    assert forced == outputs + outputs
    assert capsys.readouterr().err.count("their scoring jobs are planned again") == 1


def test_a_damaged_artefact_is_forced_once_and_an_intact_or_absent_one_never(in_empty_dir, capsys):
    files = files_of("config.yaml")
    forced = []
    replans = Replans(files.study, forced.extend)
    Path("damaged.json").write_text("x")
    Path("intact.json").write_text("{}")

    def problem_of(path):
        return f"{path} is damaged" if Path(path).read_text() == "x" else None

    for _ in range(2):
        assert replans.rebuilt_when_damaged("damaged.json", problem_of) == "damaged.json"
        replans.rebuilt_when_damaged("intact.json", problem_of)
        replans.rebuilt_when_damaged("absent.json", problem_of)
    assert forced == ["damaged.json"]
    assert capsys.readouterr().err == "damaged: damaged.json is damaged\n  its job is planned again to rebuild it\n"


def test_a_directory_rebuilt_byte_for_byte_is_ancient_to_the_jobs_that_read_it_and_other_bytes_are_not(
        in_empty_dir, capsys):
    """A base built again with the same bytes (after a killed or forced base_model job) reruns none of the jobs that
    recorded reading it (their input is ancient: Snakemake compares a directory by its mtime alone), one with other
    bytes reruns them, and a missing one is said once, naming a reader."""
    replans = Replans(files_of("config.yaml").study, [].extend)
    base, reader = Path("results/models/m"), Path("reader.json")
    base.mkdir(parents=True)
    (base / "model.safetensors").write_bytes(b"weights")
    recorded = {"path": str(base), "sha256": hashlib.sha256(
        b"model.safetensors\0" + hashlib.sha256(b"weights").hexdigest().encode()).hexdigest()}
    write_provenance(reader, {}, [], inputs={"base": recorded})
    assert replans.kept_when_unchanged(str(base), [str(reader)], tuple) == str(base)  # older than its reader
    os.utime(base, (reader.stat().st_mtime + 60,) * 2)  # built again after its reader finished
    ancient = replans.kept_when_unchanged(str(base), [str(reader)], lambda path: ("ancient", path))
    assert ancient == ("ancient", str(base))
    (base / "model.safetensors").write_bytes(b"other weights")
    os.utime(base, (reader.stat().st_mtime + 60,) * 2)
    assert Replans(replans.study, [].extend).kept_when_unchanged(str(base), [str(reader)], tuple) == str(base)
    assert replans.kept_when_unchanged(str(base), ["unfinished.json"], tuple) == str(base)  # its reader not finished
    for _ in range(2):
        assert replans.kept_when_unchanged("results/models/lost", [str(reader)], tuple) == "results/models/lost"
    said = capsys.readouterr().err
    assert said.count("results/models/lost: missing, though finished jobs read it (e.g. reader.json)") == 1
    assert "rebuild it alone first, `snakemake --cores N results/models/lost`" in said
    documented = (REPO / "docs/refusals.md").read_text()  # "Damaged results"
    assert said.replace("results/models/lost", "results/models/tiny-qwen2").replace(
        "reader.json", "results/runs/tiny-qwen2/full/baseline/seed1/steps3/provenance.json").strip() in documented


def test_a_records_table_of_other_scores_is_named_and_one_of_these_scores_is_not(in_empty_dir):
    """The records table is this config's when it recorded exactly the scores its records job reads, with the bytes
    their records name; a table copied from another study is not (rules/common.smk replans its job)."""
    import pandas as pd

    from dataflex_rl.artefacts.atomic import write_parquet
    from dataflex_rl.artefacts.provenance import inputs_metadata
    from dataflex_rl.artefacts.readable import records_problem

    scores = {}
    for name in ("a", "b"):
        Path(f"{name}.parquet").write_bytes(name.encode())
        write_provenance(f"{name}.provenance.json", {}, [f"{name}.parquet"])
        scores[f"{name}.parquet"] = f"{name}.provenance.json"

    def table(recorded: dict[str, str]) -> str:
        inputs = {path: {"path": path, "sha256": digest} for path, digest in recorded.items()}
        write_parquet("records.parquet", pd.DataFrame({"x": [1]}), metadata=inputs_metadata(inputs))
        return "records.parquet"

    digest = {name: hashlib.sha256(name.encode()).hexdigest() for name in ("a", "b")}
    assert records_problem(table({"a.parquet": digest["a"], "b.parquet": digest["b"]}), scores) is None
    assert records_problem(table({"a.parquet": digest["a"], "c.parquet": digest["b"]}), scores) == (
        "records.parquet: built from other scores than this config's records job reads (of its 2 score files, 1 are "
        "not this study's and 0 hold other bytes than their records name now; 1 of this study's 2 are not in it): "
        "copied from another study, or written by another config")
    assert "1 hold other bytes" in records_problem(table({"a.parquet": digest["b"], "b.parquet": digest["b"]}), scores)
    assert ("built from other scores than this config's records job reads (of its 60 score files, 0 are not this "
            "study's and 0 hold other bytes than their records name now; 48 of this study's 108 are not in it): copied "
            "from another study, or written by another config") in (REPO / "docs/refusals.md").read_text()
    write_parquet("records.parquet", pd.DataFrame({"x": [1]}))  # a table from before tables recorded their inputs
    assert records_problem("records.parquet", scores) is None


def test_backend_resources_take_the_largest_request_and_refuse_two_partitions():
    config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    (name,) = config["models"]
    config["models"]["small"] = {**config["models"][name], "resources": {"train": {"gpu": 2, "runtime": 9999}}}
    study = Study.from_config(config)
    big = study.models[name].job_resources("train")
    merged = backend_resources(study, "train")
    assert merged["gpu"] == max(big["gpu"], 2) and merged["runtime"] == 9999
    assert backend_resources(files_of("config.yaml").study, "train") == {}
    config["models"]["small"]["resources"]["train"]["slurm_partition"] = "a100"
    config["models"][name]["resources"] = {"train": {"slurm_partition": "gpu"}}
    with pytest.raises(ValueError, match=f"models.{name} and models.small put their train jobs on other "
                                         "slurm_partitions \\('gpu', 'a100'\\)"):
        backend_resources(Study.from_config(config), "train")
