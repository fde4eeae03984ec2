"""The verl backend's scoring side that runs without a GPU: the engine and sampling settings handed to vLLM, the
prompt-length refusal before the engine starts, the batch-invariance guard, the score records' engine columns, the
score job's GPU check, and the merge job through verl's real merger on a CPU-written FSDP checkpoint. vLLM itself
runs only on a GPU (tests/gpu/gpu_smoke.sh)."""
import json
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from dataflex_rl.backends.base import Answer
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.embedded.model import build_model, save_model, train_tokenizer
from dataflex_rl.backends.embedded.settings import ModelShape
from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.verl import scoring
from dataflex_rl.backends.verl.merge import actor_checkpoint, merge_command
from dataflex_rl.study.jobs import merge_run
from dataflex_rl.backends.verl.backend import ROLLOUT_PLACEHOLDERS
from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides
from dataflex_rl.evaluate.scoring import score_items
from dataflex_rl.evaluate.settings import EvaluationSettings
from dataflex_rl.artefacts.layout import PROVENANCE
from dataflex_rl.artefacts.provenance import DamagedArtefactError, verified_input, write_provenance
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.corpus.build import benchmark_items
from dataflex_rl.corpus.prompting import render_prompt

SHAPE = ModelShape(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, vocab_size=300)


@pytest.fixture(scope="module")
def tiny_hf(tmp_path_factory):
    """A tiny Qwen2 model directory (Hugging Face layout), built locally."""
    directory = tmp_path_factory.mktemp("tiny") / "model"
    tokenizer = train_tokenizer([f"{a} plus {b} is {a + b}" for a in range(30) for b in range(30)], SHAPE.vocab_size)
    save_model(build_model(SHAPE, tokenizer, seed=0), tokenizer, directory)
    return directory


@pytest.mark.parametrize("max_new_tokens, gpus, seed", [(4096, 1, 0), (8, 4, 7)])
def test_the_engine_gets_bfloat16_an_explicit_context_and_the_jobs_gpus(max_new_tokens, gpus, seed):
    assert scoring.engine_arguments("m", max_new_tokens=max_new_tokens, gpus=gpus, seed=seed) == {
        "model": "m", "dtype": "bfloat16", "max_model_len": 1024 + max_new_tokens, "tensor_parallel_size": gpus,
        "seed": seed}


def test_engine_options_add_settings_but_never_replace_the_scoring_ones():
    smoke = {"enforce_eager": True, "gpu_memory_utilization": 0.3}  # tests/gpu/gpu_smoke.py
    assert scoring.engine_arguments("m", max_new_tokens=8, gpus=1, seed=0, options=smoke) == {
        "model": "m", "dtype": "bfloat16", "max_model_len": 1032, "tensor_parallel_size": 1, "seed": 0, **smoke}
    with pytest.raises(ValueError, match=r"engine options \['dtype', 'max_model_len'\] would replace"):
        scoring.engine_arguments("m", max_new_tokens=8, gpus=1, seed=0,
                                 options={"max_model_len": 99, "dtype": "float16", "enforce_eager": True})


@pytest.mark.parametrize("temperature, seed", [(0.0, 0), (0.7, 3)])
def test_sampling_is_explicit_one_answer_per_prompt_without_nucleus_truncation(temperature, seed):
    assert scoring.sampling_arguments(max_new_tokens=12, temperature=temperature, seed=seed,
                                      stop_token_ids=(0, 2)) == {
        "temperature": temperature, "top_p": 1.0, "max_tokens": 12, "n": 1, "seed": seed, "stop_token_ids": [0, 2]}


def test_prompts_up_to_the_allowance_pass_and_longer_ones_are_named():
    scoring.check_prompt_lengths([1, 1024, 1024])
    with pytest.raises(ValueError, match=r"1 of 2 prompts are longer than the 1024 prompt tokens .*: prompt 1 "
                                         r"\(1025 tokens\)\. Drop those items .*max_prompt_chars"):
        scoring.check_prompt_lengths([3, 1025])
    with pytest.raises(ValueError, match=r"5 of 6 prompts .*: prompt 1 \(2000 tokens\), prompt 2 \(1025 tokens\), "
                                         r"prompt 3 \(1026 tokens\) and 2 more\."):
        scoring.check_prompt_lengths([10, 2000, 1025, 1026, 1027, 5000])


def test_vllm_is_imported_batch_invariant_or_not_at_all(monkeypatch):
    monkeypatch.delenv(scoring.BATCH_INVARIANT, raising=False)
    monkeypatch.setitem(sys.modules, "vllm", None)  # an absent package: `import vllm` raises ImportError
    with pytest.raises(ImportError, match=r"needs vLLM .*pip install 'dataflex-rl\[gpu\]'"):
        scoring.import_vllm()
    assert scoring.os.environ[scoring.BATCH_INVARIANT] == "1"  # set before the import was attempted
    # a vllm already imported without the variable cannot be made batch-invariant any more
    monkeypatch.delenv(scoring.BATCH_INVARIANT)
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    with pytest.raises(RuntimeError, match="vllm was imported before VLLM_BATCH_INVARIANT=1 was set"):
        scoring.import_vllm()


def test_the_verl_generator_loads_the_checkpoint_tokenizer_and_needs_a_gpu(tiny_hf, tmp_path):
    verl = get_backend("verl")
    untrained = verl.open_generator({"backend": "verl", "path": str(tiny_hf)}, model_dir=None, threads=1, gpus=2)
    assert (untrained.model_path, untrained.gpus) == (str(tiny_hf), 2)
    merged = verl.open_generator({"backend": "verl", "path": "Qwen/Qwen2.5-7B"}, model_dir=tiny_hf, threads=1, gpus=1)
    assert merged.model_path == str(tiny_hf)
    assert merged.tokenizer("1 plus 2").input_ids == untrained.tokenizer("1 plus 2").input_ids
    for gpus in (0, -1):
        with pytest.raises(ValueError, match=rf"needs a GPU, and the score job has none \(resource gpu={gpus}\)"):
            verl.open_generator({"backend": "verl", "path": str(tiny_hf)}, model_dir=None, threads=1, gpus=gpus)


def test_an_over_long_prompt_is_refused_before_the_engine_starts(tiny_hf, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # the refusal must come first, not vLLM's ImportError
    generator = get_backend("verl").open_generator({"backend": "verl", "path": str(tiny_hf)}, model_dir=None,
                                                   threads=1, gpus=1)
    long_prompt = render_prompt(" ".join(["7"] * 1100), tokenizer=generator.tokenizer)  # one token per digit
    with pytest.raises(ValueError, match=r"1 of 2 prompts are longer than the 1024 prompt tokens"):
        generator.generate(["1 plus 2", long_prompt], max_new_tokens=4, batch_size=2, temperature=0.0, seed=0)


class _Answers:
    """A Generator (dataflex_rl.backends.base) answering every prompt with the same Answer: the score records
    are what is tested here, not a model."""

    def __init__(self, answer):
        self.tokenizer, self.answer = None, answer

    def generate(self, prompts, **_):
        return [self.answer] * len(prompts)


ITEMS = benchmark_items("basic_arithmetic", n_items=4, seed=1)  # the first item: "Calculate 4 - 1." (3)


def test_score_records_gain_the_engines_columns_and_keep_their_own():
    plain = score_items(_Answers(Answer("3", 2)), ITEMS, "{question}", max_new_tokens=4)
    assert list(plain.columns) == ["prompt_id", "response", "length", "correct", "parsed"]
    assert plain["correct"].tolist() == [answer == "3" for answer in ITEMS["answer"]] and plain["correct"][0]
    engine = {"finish_reason": "length", "vllm_version": "0.24.0", "tensor_parallel_size": 1}
    vllm = score_items(_Answers(Answer("3", 4, engine)), ITEMS, "{question}", max_new_tokens=4)
    assert list(vllm.columns) == list(plain.columns) + ["finish_reason", "vllm_version", "tensor_parallel_size"]
    pd.testing.assert_frame_equal(vllm[plain.columns], plain.assign(length=4))
    assert vllm["finish_reason"].tolist() == ["length"] * 4


@pytest.mark.parametrize("resources, refused", [({}, True), ({"gpu": 0}, True), ({"gpu": 1}, False),
                                                ({"gpu": 4, "mem_mb": 1000}, False)])
def test_a_verl_score_job_without_a_gpu_is_refused(resources, refused):
    model = ModelSpec.from_entry("qwen", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"})
    errors = get_backend("verl").score_resource_errors("models.qwen", model, 512, 4096, resources)
    assert bool(errors) == refused
    if refused:
        assert errors[0].startswith(f"resources of rule score: gpu={resources.get('gpu', 0)}, but models.qwen "
                                    f"(backend verl) is scored with vLLM on GPUs; give the score rule gpu ≥ 1")


def test_the_verl_jobs_resources_fit_the_paper_recipe_and_embedded_asks_for_none():
    verl, embedded = get_backend("verl"), get_backend("embedded")
    recipe = yaml.safe_load((Path(__file__).parents[1] / "config" / "paper.yaml").read_text())["training"]
    assert verl.job_resources("train")["gpu"] == 8  # the released recipe's GPUs
    # the recipe's responses per step divide over them (verl refuses otherwise)
    assert recipe["prompts_per_step"] * recipe["rollouts"] % verl.job_resources("train")["gpu"] == 0
    assert verl.job_resources("score")["gpu"] == verl.job_resources("solve_rates")["gpu"] == 1
    assert "gpu" not in verl.job_resources("merge")
    assert verl.job_resources("corpus") == {}
    assert all(embedded.job_resources(rule) == {} for rule in ("train", "merge", "score"))


# --- the merge job: verl's own merger (`python -m verl.model_merger`) on a checkpoint in verl's FSDP layout --------


def _fsdp_checkpoint(hf_dir, folder):
    """One rank's full state dict (world size 1) with verl's fsdp_config.json and the huggingface/ folder beside it:
    the layout verl's FSDP checkpoint manager writes, whose merge is an identity on the weights."""
    folder.mkdir(parents=True)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    torch.save(model.state_dict(), folder / "model_world_size_1_rank_0.pt")
    (folder / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": 1}))
    model.config.save_pretrained(folder / "huggingface")
    AutoTokenizer.from_pretrained(hf_dir).save_pretrained(folder / "huggingface")
    return model.state_dict()


def test_the_checkpoint_folder_is_the_model_dir_or_its_actor_folder(tmp_path):
    for folder in (tmp_path / "a", tmp_path / "b" / "actor"):
        folder.mkdir(parents=True)
        (folder / "fsdp_config.json").write_text("{}")
    assert actor_checkpoint(tmp_path / "a") == tmp_path / "a"
    assert actor_checkpoint(tmp_path / "b") == tmp_path / "b" / "actor"
    with pytest.raises(FileNotFoundError, match="no fsdp_config.json in it or in its actor/ folder"):
        actor_checkpoint(tmp_path)
    assert merge_command("c", "t")[1:] == ["-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
                                           "c", "--target_dir", "t"]


def test_the_merge_job_writes_the_runs_weights_as_a_verified_hugging_face_directory(tiny_hf, tmp_path):
    """The merge job runs the backend's `merge` member (the slice names the model's backend: verl)."""
    from transformers import AutoModelForCausalLM

    run_model, settings = tmp_path / "model", {"models.qwen.backend": "verl", "seed": 1, "training.steps": 2}
    weights = _fsdp_checkpoint(tiny_hf, run_model / "actor")
    write_provenance(tmp_path / PROVENANCE, settings, [run_model])
    merge_run(settings, model="qwen", model_dir=run_model, model_provenance=tmp_path / PROVENANCE,
              out_dir=tmp_path / "merged")

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).state_dict()
    assert merged.keys() == weights.keys()
    for name, tensor in weights.items():  # verl saves bfloat16 weights
        torch.testing.assert_close(merged[name], tensor.to(torch.bfloat16).float(), rtol=0, atol=0)
    record = verified_input(tmp_path / "merged", tmp_path / "merged" / PROVENANCE)  # its provenance inside
    provenance = json.loads((tmp_path / "merged" / PROVENANCE).read_text())
    assert provenance["settings"] == settings and provenance["inputs"]["model"]["path"] == str(run_model)
    assert record["fingerprint"] == provenance["fingerprint"]
    assert not (tmp_path / ".merged.tmp").exists()

    (run_model / "actor" / "model_world_size_1_rank_0.pt").write_bytes(b"damaged")
    with pytest.raises(DamagedArtefactError, match="model_world_size_1_rank_0.pt: sha256"):
        merge_run(settings, model="qwen", model_dir=run_model, model_provenance=tmp_path / PROVENANCE,
                  out_dir=tmp_path / "again")


@pytest.mark.parametrize("evaluation, engine, sampling", [
    (EvaluationSettings(max_new_tokens=4096, batch_size=512, temperature=0.0), "max_model_len=5120", "temperature=0.0, top_p=1.0, "
     "max_tokens=4096, n=1, seed=<request_seed(0, prompt)>, stop_token_ids=['<eos>', \"<chat template's turn end>\"]"),
    (EvaluationSettings(max_new_tokens=8, batch_size=4, temperature=0.5, seed=3), "max_model_len=1032",
     "temperature=0.5, top_p=1.0, max_tokens=8, n=1, seed=<request_seed(3, prompt)>, stop_token_ids=['<eos>', \"<chat template's turn end>\"]")])
def test_the_dry_run_summary_names_the_merge_and_vllm_settings(evaluation, engine, sampling):
    *train, merge, score = get_backend("verl").job_commands(GRPOSettings(), evaluation, {})
    assert merge == ("merge: python -m verl.model_merger merge --backend fsdp --local_dir <run>/model[/actor] "
                     "--target_dir <run>/merged")
    assert f"dtype=bfloat16, {engine}, tensor_parallel_size=<gpu>" in score and score.startswith(
        "score: VLLM_BATCH_INVARIANT=1, vllm.LLM(")
    assert score.endswith(f"vllm.SamplingParams({sampling})")
    assert train[0].startswith("train (<state>: the run's state folder")
    assert get_backend("embedded").job_commands(GRPOSettings(), evaluation, {}) == []


def test_the_dry_run_summary_shows_verls_train_command_with_the_jobs_resources():
    """The train lines are the command the job runs (dataflex_rl.backends.verl.launch), with the merged resources'
    GPUs and CPUs, wrapped: joined again they are verl's entry point and every override in order."""
    training = GRPOSettings(prompts_per_step=64, rollouts=5)
    lines = get_backend("verl").job_commands(training, EvaluationSettings(max_new_tokens=8, temperature=0.0),
                                             {"train": {"gpu": 8, "cpus_per_task": 40}})
    command = " ".join(line.strip() for line in lines[1:-2]).split()
    overrides = run_overrides("<models.<m>.path>", training, "<seed>", gpus=8, cpus=40,
                              files=RunFiles.in_state(Path("<state>")), attention="sdpa",
                              experiment="<method>-seed<seed>", rollout_engine=ROLLOUT_PLACEHOLDERS)
    assert command == ["python", "-m", "verl.trainer.main_ppo", *overrides]
    # the rollout engine varies per model (models.<m>.rollout)
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=<models.<m>.rollout.tensor_parallel_size>" in command
    assert "trainer.n_gpus_per_node=8" in command and "ray_kwargs.ray_init.num_cpus=40" in command
    assert "data.train_batch_size=64" in command and "actor_rollout_ref.rollout.n=5" in command
