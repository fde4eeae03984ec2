"""A model's own lengths (models.<m>.training / evaluation: Study.model_training, model_evaluation) reach every job of
that model and only its slices, a model's own value equal to the study's changes nothing, and the solve-rate job's
runtime is sized by its work (dataflex_rl.study.solve_rate_time)."""
import copy
from pathlib import Path

import yaml
from snakemake.utils import update_config

from dataflex_rl.artefacts.layout import UNTRAINED
from dataflex_rl.study.config_checks import resource_errors
from dataflex_rl.study.resolved import Study
from dataflex_rl.study.rule_resources import backend_resources
from dataflex_rl.study.solve_rate_time import chunk_count, chunk_of, solve_rate_lines, solve_rate_time

REPO = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((REPO / "config/smoke.yaml").read_text())


def _overlay(*names: str) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / name).read_text()))
    return config


def _everything(study: Study, model: str) -> dict:
    """Every slice and job argument of `model`'s jobs, and the token caps its jobs hold texts to (gates: their
    numbers; their sources name the setting they come from)."""
    caps = [study.training_token_caps(model), study.score_token_caps(model)]
    got = {"base": study.base_slice(model), "score job": study.score_job(model),
           "caps": [(cap.prompt["tokens"], cap.answer["tokens"]) for cap in caps]}
    for run in [run for run in study.runs if run.model == model]:
        got[run.name] = (study.train_slice(run), study.train_job(run),
                         [study.score_slice(model, run.name, b) for b in study.benchmarks.names])
    got["untrained"] = [study.score_slice(model, UNTRAINED, b) for b in study.benchmarks.names]
    return got


def test_s2s_own_lengths_reach_its_train_round_and_score_jobs_and_leave_s1_and_s3_at_the_studys():
    study = Study.from_config(_overlay("config/paper.yaml", "config/campaigns/gradalign_verl.yaml"))
    for model, response, answer in (("qwen2.5-math-1.5b", 3072, 3072), ("qwen3-8b-base", 8192, 4096)):
        runs = [run for run in study.runs if run.model == model]
        assert len(runs) == {"qwen2.5-math-1.5b": 15, "qwen3-8b-base": 30}[model]
        # the train job's settings are what verl's data.max_response_length and the round's sampler read
        assert {study.train_job(run)["training"]["max_new_tokens"] for run in runs} == {response}
        assert {study.train_slice(run)["training.max_new_tokens"] for run in runs} == {response}
        assert study.score_job(model)["evaluation"]["max_new_tokens"] == answer
        assert {study.score_slice(model, run.name, "GSM8K")["evaluation.max_new_tokens"] for run in runs} == {answer}
    assert study.solve_rates_job("qwen3-8b-base")["sampling"]["max_new_tokens"] == 8192


def test_a_models_own_length_equal_to_the_studys_changes_no_slice_or_job():
    own = copy.deepcopy(SMOKE)
    own["models"]["tiny-qwen2"]["training"] = {"max_new_tokens": SMOKE["training"]["max_new_tokens"]}
    own["models"]["tiny-qwen2"]["evaluation"] = {"max_new_tokens": SMOKE["evaluation"]["max_new_tokens"]}
    assert _everything(Study.from_config(own), "tiny-qwen2") == _everything(Study.from_config(SMOKE), "tiny-qwen2")


def test_a_models_own_length_reruns_its_jobs_and_no_other_models():
    two = copy.deepcopy(SMOKE)
    two["models"]["other"] = copy.deepcopy(two["models"]["tiny-qwen2"])
    changed = copy.deepcopy(two)
    changed["models"]["other"]["training"] = {"max_new_tokens": 5}
    changed["models"]["other"]["evaluation"] = {"max_new_tokens": 6}
    before, after = Study.from_config(two), Study.from_config(changed)
    assert _everything(after, "tiny-qwen2") == _everything(before, "tiny-qwen2")
    run = next(run for run in after.runs if run.model == "other")
    assert after.train_slice(run)["training.max_new_tokens"] == 5 != before.train_slice(run)["training.max_new_tokens"]
    assert after.train_job(run)["training"]["max_new_tokens"] == 5
    assert after.score_slice("other", UNTRAINED, "gcd")["evaluation.max_new_tokens"] == 6
    assert after.base_slice("other") == before.base_slice("other")  # the base's weights do not depend on lengths
    # the token caps the positions leave beside a response name the setting they come from
    assert after.training_token_caps("other").prompt["source"].endswith(
        "− models.other.training.max_new_tokens 5, the default of data_validation.corpus.max_prompt_tokens")


def _solve_rate_study(tmp_path: Path, model: dict, **partitions) -> Study:
    """A verl model measuring the solve rates of a corpus of 1 procedural row and two files of 200 and 150 rows."""
    config = copy.deepcopy(SMOKE)
    config["models"] = {"qwen": {"backend": "verl", "path": "Qwen/Qwen3-8B-Base", **model}}
    config["training"].update(rollouts=32, max_new_tokens=8192)
    config["corpus"].update(sources=["basic_arithmetic"], items_per_domain=1,
                            files=[{"path": "a.jsonl", "domain": "math"}, {"path": "b.jsonl", "domain": "logic"}])
    for name, rows in (("a.jsonl", 200), ("b.jsonl", 150)):
        (tmp_path / name).write_text("".join('{"prompt": "q", "answer": "1"}\n' for _ in range(rows)))
    config["regimes"] = {"easy": {"transform": "low_utility", "share": 0.5}}
    config["campaigns"] = {"easy": {"regimes": ["easy"], "methods": ["baseline"]}}
    if partitions:
        config["cluster"] = {"partitions": partitions}
    return Study.from_config(config)


def test_the_solve_rate_runtime_is_its_generations_times_tokens_over_the_throughput(tmp_path):
    # 351 prompts × 32 samples × 8192 tokens = 92,012,544 tokens; the job asks for no GPU type, so at the lowest
    # estimate known (an A100-80GB's worst-case 1,300 a second): 70,779.6 s = 1,179.6 → 1,180 min, + 15 to start
    study = _solve_rate_study(tmp_path, {})
    sized = solve_rate_time(study, "qwen", tmp_path)
    assert (sized.rows, sized.samples, sized.max_new_tokens, sized.tokens, sized.minutes) == (
        351, 32, 8192, 92_012_544, 1195)
    assert backend_resources(study, "solve_rates", tmp_path)["runtime"] == 1195
    assert backend_resources(study, "train", tmp_path)["runtime"] == 2880  # the other rules keep their defaults
    assert solve_rate_lines(study, tmp_path) == [
        "solve rates of qwen: runtime sized at 351 prompts at most (corpus.items_per_domain 1 over 1 domain(s) of "
        "corpus.sources: 1; corpus.files[0] 'a.jsonl': 200; corpus.files[1] 'b.jsonl': 150) × K = 32 samples "
        "(training.rollouts) × up to 8,192 tokens (training.max_new_tokens) = 92,012,544 tokens at 1,300 tokens/s of one "
        "vLLM engine (the lowest estimate known, an A100-80GB's: the job asks for no GPU type "
        "(models.<m>.resources.solve_rates.gpu_model); batch-invariant, every sample to the cap; calibrated on no GPU) "
        "+ 15 min to start = 1,195 min (a model's resources.solve_rates.runtime or --set-resources "
        "solve_rates:runtime=<minutes> overrides it; each finished part of 128 prompts is kept for a retry)"]
    # a model's own length shortens it: 351 × 32 × 3072 / 1300 / 60 = 442.4 → 443 + 15
    shorter = _solve_rate_study(tmp_path, {"training": {"max_new_tokens": 3072}})
    assert backend_resources(shorter, "solve_rates", tmp_path)["runtime"] == 458
    # a GPU type asked for sizes it at the type's estimate: an H200's 4,200 a second, 365.1 → 366 + 15
    h200 = _solve_rate_study(tmp_path, {"resources": {"solve_rates": {"gpu_model": "h200"}}})
    assert backend_resources(h200, "solve_rates", tmp_path)["runtime"] == 381
    assert ("tokens at 4,200 tokens/s of one vLLM engine (gpu_model h200's estimate; batch-invariant"
            in solve_rate_lines(h200, tmp_path)[0])
    # a type without an estimate takes the lowest known, and says so
    a100 = _solve_rate_study(tmp_path, {"resources": {"solve_rates": {"gpu_model": "a100_40gb"}}})
    assert backend_resources(a100, "solve_rates", tmp_path)["runtime"] == 1195
    assert "for gpu_model 'a100_40gb', which has none" in solve_rate_lines(a100, tmp_path)[0]
    # a model's own runtime wins
    given = _solve_rate_study(tmp_path, {"resources": {"solve_rates": {"runtime": 100}}})
    assert backend_resources(given, "solve_rates", tmp_path)["runtime"] == 100


def test_the_corpus_is_measured_in_chunks_of_the_backends_job_size(tmp_path, monkeypatch):
    """351 prompts at most in jobs of 100: ⌈351 / 100⌉ = 4 jobs, each sized for 100 prompts (100 × 32 × 8192 tokens /
    1300 a second = 336.1 → 337 min, + 15 to start), and one solve_rates job per chunk in the DAG's inputs."""
    from dataflex_rl.backends.verl.backend import VerlBackend
    from dataflex_rl.study.files import StudyFiles

    monkeypatch.setattr(VerlBackend, "solve_rate_job_prompts", 100)
    study = _solve_rate_study(tmp_path, {})
    assert chunk_count(study, "qwen", tmp_path) == 4
    assert [chunk_of(study, "qwen", i, tmp_path) for i in (0, 3)] == [{"index": 0, "of": 4, "size": 100},
                                                                       {"index": 3, "of": 4, "size": 100}]
    sized = solve_rate_time(study, "qwen", tmp_path)
    assert (sized.rows, sized.corpus_rows, sized.chunks, sized.tokens, sized.minutes) == (
        100, 351, 4, 26_214_400, 352)
    assert solve_rate_lines(study, tmp_path)[0].startswith(
        "solve rates of qwen: runtime sized at 100 prompts at most (one of 4 jobs over the corpus's 351 at most: "
        "corpus.items_per_domain 1 over 1 domain(s) of corpus.sources: 1; corpus.files[0] 'a.jsonl': 200; "
        "corpus.files[1] 'b.jsonl': 150) × K = 32 samples")
    monkeypatch.chdir(tmp_path)  # the Snakefile's look-ups count the corpus files from the working directory
    assert StudyFiles(study, [], []).solve_rate_chunks("qwen") == [
        f"results/corpus/solve_rates/qwen/chunk{i}.parquet" for i in range(4)]


def test_an_embedded_solve_rate_job_keeps_the_rules_defaults(tmp_path):
    config = copy.deepcopy(SMOKE)
    config["regimes"] = {"easy": {"transform": "low_utility", "share": 0.5}}
    config["campaigns"] = {"easy": {"regimes": ["easy"], "methods": ["baseline"]}}
    study = Study.from_config(config)
    assert study.solve_rates_models() == ["tiny-qwen2"]
    assert solve_rate_time(study, "tiny-qwen2", tmp_path) is None and solve_rate_lines(study, tmp_path) == []
    assert "runtime" not in backend_resources(study, "solve_rates", tmp_path)


def test_a_sized_solve_rate_runtime_beyond_the_partition_is_refused_with_its_arithmetic(tmp_path):
    study = _solve_rate_study(tmp_path, {}, gpu={"max_runtime": 120})
    resources = {"solve_rates": {"runtime": 1195, "slurm_partition": "gpu", "gpu": 1}}
    assert resource_errors(study, resources, tmp_path) == [
        "resources of rule solve_rates: runtime=1195 exceeds cluster.partitions.gpu.max_runtime = 120 minutes (sized "
        "for the solve rates of qwen: 351 prompts at most (corpus.items_per_domain 1 over 1 domain(s) of "
        "corpus.sources: 1; corpus.files[0] 'a.jsonl': 200; corpus.files[1] 'b.jsonl': 150) × K = 32 samples "
        "(training.rollouts) × up to 8,192 tokens (training.max_new_tokens) = 92,012,544 tokens at 1,300 tokens/s of one "
        "vLLM engine (the lowest estimate known, an A100-80GB's: the job asks for no GPU type "
        "(models.<m>.resources.solve_rates.gpu_model); batch-invariant, every sample to the cap; calibrated on no GPU) "
        "+ 15 min to start = 1,195 min; with runtime 120 a job finishes over ⌈1195 / 120⌉ = 10 attempts, each "
        "resuming from the parts of 128 prompts kept: set models.qwen.resources.solve_rates.runtime to 120 and the "
        "profile's retries to at least 9, or measure fewer prompts or shorter answers); lower the request (profile set-resources or --set-resources) "
        "or use another partition"]
    # a runtime given on the command line is refused as any other request, without the sizing
    given = {"solve_rates": {"runtime": 500, "slurm_partition": "gpu", "gpu": 1}}
    assert resource_errors(study, given, tmp_path) == [
        "resources of rule solve_rates: runtime=500 exceeds cluster.partitions.gpu.max_runtime = 120 minutes; lower "
        "the request (profile set-resources or --set-resources) or use another partition"]
