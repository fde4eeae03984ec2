"""What the dry run checks and shows of a verl prompt selection's rounds: the memory of the round's backward passes on
one GPU and on the host, the parameter count read from a model's config.json, and the round's command in the summary."""
import pytest
from transformers import AutoModelForCausalLM

from hf_model_dir import save_hf_model_dir
from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.verl.model_heads import model_parameters
from dataflex_rl.backends.verl.probe_settings import ProbeSettings, probe_memory_errors
from dataflex_rl.evaluate.settings import EvaluationSettings
from dataflex_rl.training.recipe import GRPOSettings

QWEN3_8B = 8190735360  # Qwen3-8B-Base's parameters (its model card: 8.2B)


def test_the_parameter_count_is_the_models_own(tmp_path):
    folder = save_hf_model_dir(tmp_path / "tiny", heads=4, kv_heads=2)
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert model_parameters(str(folder)) == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert model_parameters(str(tmp_path / "absent")) is None


def test_an_8b_round_fits_an_h200_and_not_an_80gb_gpu():
    # 12 bytes a parameter: 98.3e9 bytes = 91.5 GiB, within 90% of 141 GB, beyond 90% of 80 GB
    assert probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=141), host_mb=320000) == []
    errors = probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=80), host_mb=320000)
    assert errors == ["models.q.probe.gpu_memory_gb: 80, but a selection round's backward passes need 92 GiB on one "
                      "GPU for 8.19e+09 parameters (bf16 weights and gradient, fp32 validation and mean gradients: 12 "
                      "bytes a parameter, within 90% of the GPU) — train on GPUs of ≥ 102 GiB (and say so in "
                      "models.q.probe.gpu_memory_gb), or use a smaller model"]
    # 8 bytes a parameter on the host: 65.5e9 bytes = 62,490 MB
    host = probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=141), host_mb=32000)
    assert host == ["resources of rule train: mem_mb=32000, but a selection round of models.q holds 62490 MB on the "
                    "host: the model, vLLM's sleeping weights and the validation gradient (8 bytes a parameter) — raise "
                    "the train rule's mem_mb (models.q.resources.train.mem_mb)"]


def test_whole_group_gradients_on_the_host_are_counted_and_name_the_options():
    """A projection or normalised validation groups hold whole fp32 gradients on the host: 100 groups of a
    1.5e9-parameter model are 100 × 1.5e9 × 4 = 600e9 bytes = 572,205 MB besides its 8 bytes a parameter (11,444 MB)."""
    settings = ProbeSettings(gpu_memory_gb=80)
    assert probe_memory_errors("models.q", 1_500_000_000, settings, host_mb=320000) == []
    refused = probe_memory_errors("models.q", 1_500_000_000, settings, host_mb=320000, gradient_rows=100)
    assert refused == ["resources of rule train: mem_mb=320000, but a selection round of models.q holds 583649 MB on "
                       "the host: the model, vLLM's sleeping weights and the validation gradient (8 bytes a parameter) "
                       "and 100 whole fp32 gradients of its groups (572205 MB: a projection_dim holds the M "
                       "candidates', normalise_validation_groups the |P_v| validation groups') — raise the train "
                       "rule's mem_mb (models.q.resources.train.mem_mb), or leave those options out (every other "
                       "reduction streams one group at a time)"]


def test_the_largest_round_counts_the_gradients_its_options_hold_at_once():
    from dataflex_rl.policies.catalogue import Family
    from dataflex_rl.policies.methods import MethodSpec
    from dataflex_rl.study.config_checks import _largest_selection_round

    def method(policy, **params):
        return MethodSpec(policy, policy, params, Family.prompt_selection)

    assert _largest_selection_round([method("gradalign"), method("accgreedy")]).gradient_rows == 0  # streamed
    assert _largest_selection_round([method("gradalign", normalise_validation_groups=True, validation_size=100),
                                     method("align")]).gradient_rows == 100
    assert _largest_selection_round([method("align", projection_dim=64, candidates_per_round=512),
                                     method("gradalign", normalise_validation_groups=True)]).gradient_rows == 512


def test_the_train_resource_check_reads_the_probe_block_only_with_a_selection():
    from dataflex_rl.prompt_selection.candidates import SelectionSize

    verl = get_backend("verl")
    entry = {"backend": "verl", "path": "Qwen/Qwen3-8B-Base", "probe": {"parameters": QWEN3_8B, "gpu_memory_gb": 80}}
    model = ModelSpec.from_entry("q", entry)
    resources = {"gpu": 8, "cpus_per_task": 40, "mem_mb": 320000}
    training = GRPOSettings(prompts_per_step=128, rollouts=32)
    refused = verl.train_resource_errors("models.q", model, training, resources, None, SelectionSize(5120, 128))
    assert len(refused) == 1 and refused[0].startswith("models.q.probe.gpu_memory_gb: 80")
    assert not any("probe" in error for error in verl.train_resource_errors("models.q", model, training, resources,
                                                                             None, None))
    # a model whose config does not write the block keeps the settings it had
    assert "probe" not in verl.model_settings({"backend": "verl", "path": "Qwen/Qwen3-8B-Base"})
    assert verl.model_settings(entry)["probe"] == {"gpu_memory_gb": 80, "parameters": QWEN3_8B, "micro_batch": 1}


@pytest.mark.parametrize("tokens", [8, 8192])
def test_the_summary_names_the_rounds_rollout_and_gradient_settings(tokens):
    lines = get_backend("verl").job_commands(GRPOSettings(max_new_tokens=tokens, temperature=0.9),
                                             EvaluationSettings(max_new_tokens=8, temperature=0.0),
                                             {"train": {"gpu": 8}}, prompt_selection=True)
    probe = lines[-1]
    assert probe.startswith("selection round (before each verl segment of steps_per_round steps, in the train job, on "
                            "its 8 GPUs): python -m dataflex_rl.backends.verl.round_job")
    assert (f"max_model_len={1024 + tokens}, seed=<seed>, enable_sleep_mode=True)" in probe
            and "tensor_parallel_size=<models.<m>.rollout.tensor_parallel_size>" in probe)
    assert (f"vllm.SamplingParams(n=<k_r or k_v>, temperature=<score_temperature, else 0.9>, top_p=1.0, top_k=-1, "
            f"max_tokens={tokens}, seed=<request_seed(seed and stream, prompt)>") in probe
    assert ("dtype=bfloat16), a replica on each of the 8 GPUs (the groups dealt round-robin), "
            "models.<m>.probe.micro_batch responses per backward (default 1)") in probe
    # a study without a prompt selection shows no round
    assert not any(line.startswith("selection round") for line in get_backend("verl").job_commands(
        GRPOSettings(), EvaluationSettings(), {"train": {"gpu": 8}}))


def test_adam_preconditioning_is_refused_on_verl_and_every_validation_source_is_not():
    from dataflex_rl.backends.verl.probe_settings import check_selection_options
    from dataflex_rl.policies.catalogue import Family
    from dataflex_rl.policies.methods import MethodSpec

    for params in ({}, {"validation": {"path": "clean.jsonl"}}, {"validation": {"benchmark": "gcd"}}):
        assert check_selection_options(MethodSpec("gradalign", "gradalign", params, Family.prompt_selection)) == []
    adam = MethodSpec("gradalign", "gradalign", {"precondition": "adam"}, Family.prompt_selection)
    assert [error.split(":")[0] for error in check_selection_options(adam)] == ["params.precondition"]
