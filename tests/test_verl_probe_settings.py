"""What the dry run checks and shows of a verl prompt selection's rounds: the memory of the round's backward passes on
one GPU and on the host, the parameter count read from a model's config.json, and the round's command in the summary."""
import pytest
from transformers import AutoModelForCausalLM

from hf_model_dir import save_hf_model_dir
from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.verl.model_heads import model_parameters
from dataflex_rl.backends.verl.probe_settings import (GIB, ModelShape, ProbeMemory, ProbeSettings, probe_memory,
                                                      probe_memory_errors)
from dataflex_rl.evaluate.settings import EvaluationSettings
from dataflex_rl.training.recipe import GRPOSettings

QWEN3_8B = 8190735360  # Qwen3-8B-Base's parameters (its model card: 8.2B)
# Qwen3-8B's config.json (the hub's Qwen/Qwen3-8B-Base): what the memory model and the parameter count read of it
QWEN3_8B_CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
                   "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 32768,
                   "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": False, "hidden_act": "silu",
                   "attention_bias": False, "torch_dtype": "bfloat16"}
QWEN3_8B_SHAPE = ModelShape(hidden=4096, intermediate=12288, layers=36, vocab=151936, heads=32, kv_heads=8,
                            head_dim=128)


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
                      "bytes a parameter, within 90% of the GPU; an estimate without the activations and logits, which "
                      "need the model's shape: its config.json or a declared architecture) — train on GPUs of ≥ 102 GiB "
                      "(and say so in "
                      "models.q.probe.gpu_memory_gb), or use a smaller model"]
    # on the host, one engine (round_host_memory): 2 (the model) + 2 (the engine's sleeping weights) + 8 (g_v, its
    # unit direction) + 4 (the replicas' one sum) = 16 bytes a parameter, 131.05e9 bytes, + 24 × 2^22 bytes of blocks
    # in flight: 131,152,429,056 bytes = 125,076.7 MB
    host = probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=141), host_mb=32000)
    assert host == ["resources of rule train: mem_mb=32000, but a selection round of models.q holds 125077 MB on the "
                    "host at its peak, for 8.19e+09 parameters: the HF model between backward passes (bf16, 15623 MB); "
                    "the weights of its 1 sleeping vLLM engine(s), pinned bf16 copies (1 × 2 bytes a parameter, 15623 "
                    "MB); the validation gradient and its unit direction (fp32, 62490 MB); the fp32 sum the replicas "
                    "add their gradients into (31245 MB); the blocks in flight (96 MB) (dataflex_rl/backends/verl/"
                    "probe_settings.py: round_host_memory) — set models.q.resources.train.mem_mb to at least 125077"]
    assert probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=141), host_mb=125077) == []
    assert len(probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=141), host_mb=125076)) == 1


def test_the_host_holds_each_sleeping_engines_weights():
    """8 engines (8 GPUs at tensor_parallel_size 1) add 8 × 2 bytes a parameter: Qwen3-8B's round holds 30 bytes a
    parameter, 245.8e9 bytes = 234,435 MB, which the train rule's default 320,000 MB holds and 200,000 does not; at
    tensor_parallel_size 2 the 4 engines' 171,950 MB fit 200,000 (backend._probe_errors counts the engines)."""
    from dataflex_rl.backends.verl.probe_settings import round_host_memory

    memory = round_host_memory(QWEN3_8B, engines=8)
    assert (memory.model, memory.engines, memory.validation, memory.accumulation) == (
        2 * QWEN3_8B, 16 * QWEN3_8B, 8 * QWEN3_8B, 4 * QWEN3_8B)
    assert memory.total == 30 * QWEN3_8B + 24 * (1 << 22) and round(memory.total / (1 << 20)) == 234435
    assert round_host_memory(QWEN3_8B, 8, gradient_rows=3).total == memory.total + 3 * 4 * QWEN3_8B
    verl = get_backend("verl")

    def errors(mem_mb, tensor_parallel_size=1):
        model = ModelSpec.from_entry("q", {"backend": "verl", "path": "Qwen/Qwen3-8B-Base",
                                           "rollout": {"tensor_parallel_size": tensor_parallel_size},
                                           "probe": {"parameters": QWEN3_8B, "gpu_memory_gb": 141}})
        return verl._probe_errors("models.q", model, {"gpu": 8, "mem_mb": mem_mb}, 0, GRPOSettings(), None,
                                  QWEN3_8B)

    assert errors(320000) == []
    refused = errors(200000)
    assert len(refused) == 1 and "holds 234435 MB on the host" in refused[0]
    assert "the weights of its 8 sleeping vLLM engine(s), pinned bf16 copies (8 × 2 bytes a parameter, 124981 MB)" \
        in refused[0] and refused[0].endswith("set models.q.resources.train.mem_mb to at least 234435")
    assert errors(200000, tensor_parallel_size=2) == []


def test_whole_group_gradients_on_the_host_are_counted_and_name_the_options():
    """A projection or normalised validation groups hold whole fp32 gradients on the host: 100 groups of a
    1.5e9-parameter model are 100 × 1.5e9 × 4 = 600e9 bytes = 572,205 MB besides the round's 16 bytes a parameter
    with one engine and its 96 MB of blocks (22,984 MB)."""
    settings = ProbeSettings(gpu_memory_gb=80)
    assert probe_memory_errors("models.q", 1_500_000_000, settings, host_mb=320000) == []
    refused = probe_memory_errors("models.q", 1_500_000_000, settings, host_mb=320000, gradient_rows=100)
    assert refused == ["resources of rule train: mem_mb=320000, but a selection round of models.q holds 595189 MB on "
                       "the host at its peak, for 1.5e+09 parameters: the HF model between backward passes (bf16, "
                       "2861 MB); the weights of its 1 sleeping vLLM engine(s), pinned bf16 copies (1 × 2 bytes a "
                       "parameter, 2861 MB); the validation gradient and its unit direction (fp32, 11444 MB); the "
                       "fp32 sum the replicas add their gradients into (5722 MB); the blocks in flight (96 MB); 100 "
                       "whole fp32 gradients of its groups (572205 MB: a projection_dim holds the M candidates', "
                       "normalise_validation_groups the |P_v| validation groups') (dataflex_rl/backends/verl/"
                       "probe_settings.py: round_host_memory) — set models.q.resources.train.mem_mb to at least "
                       "595189, or leave those options out (every other reduction streams one group at a time)"]


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
    # a rollout share that fits beside the FSDP state on 80 GiB GPUs (train_memory: 15.3 + 1.5 + 0.7 · 80 GiB)
    entry = {"backend": "verl", "path": "Qwen/Qwen3-8B-Base", "probe": {"parameters": QWEN3_8B, "gpu_memory_gb": 80},
             "rollout": {"gpu_memory_utilization": 0.7}}
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


def test_qwen3_8b_shape_and_layer_bytes_by_hand():
    assert ModelShape.of(QWEN3_8B_CONFIG) == QWEN3_8B_SHAPE
    # 12H + 8I + 14A + 12K, A = 32 × 128 = 4096, K = 8 × 128 = 1024
    assert QWEN3_8B_SHAPE.layer_bytes == 12 * 4096 + 8 * 12288 + 14 * 4096 + 12 * 1024 == 217_088
    # no head_dim: hidden / heads; no KV heads: one per head; a multimodal config's text_config; a GPT-2 config: none
    assert ModelShape.of({**QWEN3_8B_CONFIG, "head_dim": None, "num_key_value_heads": None}) == ModelShape(
        4096, 12288, 36, 151936, 32, 32, 128)
    assert ModelShape.of({"model_type": "qwen2_5_vl", "text_config": QWEN3_8B_CONFIG}) == QWEN3_8B_SHAPE
    assert ModelShape.of({"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257}) is None
    assert ModelShape.of(None) is None


def test_the_qwen3_8b_round_at_8k_token_responses_by_hand():
    """Qwen3-8B, 1024 prompt + 8192 response tokens (S = 9216):
    micro_batch 8, T = 73,728 tokens:
      parameters 8,190,735,360 × 12                   = 98,288,824,320
      held       73,728 × 2 × 4096 × (36 + 4)          = 24,159,191,040
      mask       8 × 9216² × 3                         =  2,038,431,744
      layer      73,728 × (217,088 + 6 × 4096)         = 17,817,403,392
      logits     8 × 128 positions × 151,936 × 12      =  1,866,989,568 (smaller than the layer)
      total                                           = 142,303,850,496 = 132.5 GiB > 0.9 × 139 GiB = 125.1 GiB
      (141 GB counted as 139 GiB: dataflex_rl/backends/verl/gpu_types.py)
    micro_batch 1, T = 9216: 98,288,824,320 + 3,019,898,880 + 254,803,968 + max(2,227,175,424, 1,866,989,568)
      = 103,790,702,592 = 96.7 GiB; micro_batch 4: 112.0 GiB and 6: 122.3 GiB fit, 7: 127.4 GiB does not.
    The full-logits path it replaced kept B·W·V·4 = 8 × 8192 × 151,936 × 4 = 39.8e9 bytes of fp32 log-softmax alone
    (the review's 10 bytes a logit: 99.6e9), and every layer's activations: 36 × 73,728 × 217,088 = 576e9."""
    eight = probe_memory(QWEN3_8B, QWEN3_8B_SHAPE, 8, 1024, 8192)
    assert eight == ProbeMemory(parameters=98_288_824_320, held=24_159_191_040, mask=2_038_431_744,
                                layer=17_817_403_392, logits=1_866_989_568)
    assert eight.total == 142_303_850_496
    one = probe_memory(QWEN3_8B, QWEN3_8B_SHAPE, 1, 1024, 8192)
    assert one == ProbeMemory(parameters=98_288_824_320, held=3_019_898_880, mask=254_803_968, layer=2_227_175_424,
                              logits=1_866_989_568)
    assert one.total == 103_790_702_592
    assert [round(probe_memory(QWEN3_8B, QWEN3_8B_SHAPE, b, 1024, 8192).total / GIB, 1) for b in (4, 6, 7)] == [
        112.0, 122.3, 127.4]
    # a short response: the logit chunk holds its 64 positions only, 8 × 64 × 151,936 × 12
    assert probe_memory(QWEN3_8B, QWEN3_8B_SHAPE, 8, 1024, 64).logits == 8 * 64 * 151936 * 12


def test_the_memory_check_refuses_micro_batch_8_with_the_arithmetic_and_the_largest_that_fits():
    settings = ProbeSettings(gpu_memory_gb=141, parameters=QWEN3_8B, micro_batch=8)
    refused = probe_memory_errors("models.q", QWEN3_8B, settings, 320000, shape=QWEN3_8B_SHAPE, prompt_tokens=1024,
                                  response_tokens=8192)
    assert refused == [
        "models.q.probe.micro_batch: 8, but a selection round's backward passes need an estimated 132.5 GiB on one "
        "GPU, beyond 125.1 GiB (90% of models.q.probe.gpu_memory_gb 141 GB, counted as 139 GiB): 8.19e+09 parameters "
        "× 12 bytes (bf16 weights and gradient, fp32 validation and mean gradients) = 91.5 GiB; micro_batch 8 × (1024 prompt + 8192 "
        "response tokens) = 73728 tokens, holding their 36 checkpointed layers' inputs and the final norm's, 2 × 4096 "
        "× (36 + 4) bytes a token = 22.5 GiB; the attention mask, 8 × 9216² × 3 bytes = 1.9 GiB; and the larger of "
        "one layer recomputed, 217088 + 6 × 4096 bytes a token = 16.6 GiB, and one logit chunk, 1024 tokens × 151936 "
        "× 12 bytes = 1.7 GiB (an estimate from its shape: dataflex_rl/backends/verl/probe_settings.py, "
        "calibrated on the CPU, on no GPU) — lower models.q.probe.micro_batch to 6 (the largest that fits), or train "
        "on GPUs of ≥ 150 GB (and say so in models.q.probe.gpu_memory_gb)"]  # 132.5 / 0.9 + 2 = 149.2
    for fits in (1, 4, 6):
        assert probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=141, micro_batch=fits), 320000,
                                   shape=QWEN3_8B_SHAPE, prompt_tokens=1024, response_tokens=8192) == []


def test_where_one_response_does_not_fit_the_fix_is_the_response_length_or_the_gpu():
    # 108 GB counted as 106 GiB: 0.9 × 106 GiB = 95.4 GiB < 96.7 GiB at micro_batch 1; 5537 response tokens
    # (S = 6561) fit; the GPUs that would fit: 96.7 / 0.9 + 2 = 109.4 → 110 GB
    one = ProbeSettings(gpu_memory_gb=108, micro_batch=1)
    [refused] = probe_memory_errors("models.q", QWEN3_8B, one, 320000, shape=QWEN3_8B_SHAPE, prompt_tokens=1024,
                                    response_tokens=8192)
    assert refused.startswith("models.q.probe.micro_batch: 1, but a selection round's backward passes need an "
                              "estimated 96.7 GiB on one GPU, beyond 95.4 GiB")
    assert refused.endswith("— lower training.max_new_tokens to 5537 (at micro_batch 1), or train on GPUs of ≥ 110 "
                            "GB (and say so in models.q.probe.gpu_memory_gb)")
    assert probe_memory(QWEN3_8B, QWEN3_8B_SHAPE, 1, 1024, 5537).total <= 0.9 * 106 * GIB
    assert probe_memory(QWEN3_8B, QWEN3_8B_SHAPE, 1, 1024, 5538).total > 0.9 * 106 * GIB
    # the parameters alone beyond the GPU: its memory is the key, with the activations in the estimate
    [alone] = probe_memory_errors("models.q", QWEN3_8B, ProbeSettings(gpu_memory_gb=102, micro_batch=1), 320000,
                                  shape=QWEN3_8B_SHAPE, prompt_tokens=1024, response_tokens=8192)
    assert alone.startswith("models.q.probe.gpu_memory_gb: 102, but a selection round's backward passes need an "
                            "estimated 96.7 GiB on one GPU, beyond 90.0 GiB")
    assert alone.endswith("— train on GPUs of ≥ 110 GB (and say so in models.q.probe.gpu_memory_gb), or use a "
                          "smaller model")


def test_the_train_resource_check_reads_the_shape_from_config_json_and_the_rounds_token_lengths(tmp_path, capsys):
    """A local directory holding only Qwen3-8B's config.json: the dry run counts its parameters on the meta device
    (8,190,735,360) and its activations at the corpus's prompt cap + training.max_new_tokens."""
    import json

    from dataflex_rl.prompt_selection.candidates import SelectionSize

    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
    assert model_parameters(str(tmp_path / "qwen3-8b")) == QWEN3_8B
    verl = get_backend("verl")
    resources = {"gpu": 8, "cpus_per_task": 40, "mem_mb": 320000}
    training = GRPOSettings(prompts_per_step=128, rollouts=32, max_new_tokens=8192)

    def errors(micro_batch, prompt_cap=None):
        model = ModelSpec.from_entry("q", {"backend": "verl", "path": str(tmp_path / "qwen3-8b"),
                                           "probe": {"gpu_memory_gb": 141, "micro_batch": micro_batch}})
        found = verl._probe_errors("models.q", model, resources, 0, training, prompt_cap, QWEN3_8B)
        assert set(found) <= set(verl.train_resource_errors("models.q", model, training, resources, prompt_cap,
                                                            SelectionSize(5120, 128)))
        return found

    [refused] = errors(8)
    assert refused.startswith("models.q.probe.micro_batch: 8, but a selection round's backward passes need an "
                              "estimated 132.5 GiB")
    assert "micro_batch 8 × (1024 prompt + 8192 response tokens)" in refused
    assert errors(6) == []
    # a corpus prompt cap of 4096 tokens: S = 12,288, and micro_batch 6 no longer fits (133.2 GiB), nor 5 (126.2 of
    # 125.1); 4 does
    [capped] = errors(6, {"tokens": 4096, "source": "data_validation.corpus.max_prompt_tokens"})
    assert "micro_batch 6 × (4096 prompt + 8192 response tokens) = 73728 tokens" in capped
    assert "lower models.q.probe.micro_batch to 4 (the largest that fits)" in capped
    assert "were not counted" not in capsys.readouterr().err


def test_without_config_json_the_check_says_the_activations_were_not_counted(capsys):
    model = ModelSpec.from_entry("q", {"backend": "verl", "path": "Qwen/Qwen3-8B-Base",
                                       "probe": {"parameters": QWEN3_8B, "gpu_memory_gb": 141, "micro_batch": 8}})
    assert get_backend("verl")._probe_errors("models.q", model, {"mem_mb": 320000}, 0, GRPOSettings(), None,
                                             QWEN3_8B) == []
    assert ("models.q: the selection round's GPU memory was checked for its parameters only (12 bytes each): its "
            "config.json cannot be read here and models.q.architecture is not declared, so the activations and logits "
            "of models.q.probe.micro_batch responses were not counted") in capsys.readouterr().err


# Qwen3-8B's config.json as models.<m>.architecture declares it: the keys ModelShape reads
QWEN3_8B_ARCHITECTURE = {key: QWEN3_8B_CONFIG[key] for key in (
    "hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size", "num_attention_heads", "num_key_value_heads",
    "head_dim")}


def test_a_declared_architecture_stands_in_for_config_json_in_the_memory_check(tmp_path, capsys):
    """The hub name not cached, its shape declared: the round's estimate is the one config.json gives (micro_batch 8
    refused at 132.5 GiB, 6 fits), and no line says the activations were not counted."""
    import json

    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
    verl, training = get_backend("verl"), GRPOSettings(prompts_per_step=128, rollouts=32, max_new_tokens=8192)

    def errors(path, micro_batch, **declared):
        model = ModelSpec.from_entry("q", {"backend": "verl", "path": path, **declared,
                                           "probe": {"gpu_memory_gb": 141, "micro_batch": micro_batch}})
        return verl._probe_errors("models.q", model, {"mem_mb": 320000}, 0, training, None, QWEN3_8B)

    declared = errors("Qwen/Qwen3-8B-Base", 8, architecture=QWEN3_8B_ARCHITECTURE)
    assert declared == errors(str(tmp_path / "qwen3-8b"), 8) and "estimated 132.5 GiB" in declared[0]
    assert errors("Qwen/Qwen3-8B-Base", 6, architecture=QWEN3_8B_ARCHITECTURE) == []
    assert "were not counted" not in capsys.readouterr().err


def test_config_json_wins_over_a_declared_architecture_and_one_that_differs_is_refused(tmp_path):
    import json

    from dataflex_rl.backends.verl.model_heads import declared_architecture_errors

    (tmp_path / "qwen3-8b").mkdir()
    (tmp_path / "qwen3-8b" / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
    path = str(tmp_path / "qwen3-8b")
    assert declared_architecture_errors("models.q", path, QWEN3_8B_ARCHITECTURE) == []
    assert declared_architecture_errors("models.q", path, None) == []
    assert declared_architecture_errors("models.q", "Qwen/not-cached", QWEN3_8B_ARCHITECTURE) == []  # nothing to compare
    # head_dim left out: hidden / heads = 4096 / 32 = 128, Qwen3-8B's own, so the shape is the same
    assert declared_architecture_errors("models.q", path, {
        key: value for key, value in QWEN3_8B_ARCHITECTURE.items() if key != "head_dim"}) == []
    wrong = {**QWEN3_8B_ARCHITECTURE, "num_hidden_layers": 28, "num_key_value_heads": 4}
    assert declared_architecture_errors("models.q", path, wrong) == [
        f"models.q.architecture: the config.json of {path!r} gives another shape (num_hidden_layers 28 declared, 36 "
        f"read; num_key_value_heads 4 declared, 8 read); copy its values into models.q.architecture, or remove it (the "
        f"dry run reads config.json wherever it can)"]


def test_the_tensor_parallel_check_reads_a_declared_architectures_heads():
    """Qwen2.5-7B declared (28 attention, 4 key-value heads): a rollout TP of 8 does not divide its 28 heads."""
    model = ModelSpec.from_entry("q", {"backend": "verl", "path": "Qwen/Qwen2.5-7B", "architecture": {
        "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "vocab_size": 152064,
        "num_attention_heads": 28, "num_key_value_heads": 4}})
    verl = get_backend("verl")
    assert verl._heads_problem(model, 4) is None
    assert verl._heads_problem(model, 8) == (
        "does not divide the 28 attention heads of 'Qwen/Qwen2.5-7B' (models.q.architecture, as declared: 28 "
        "attention, 4 key-value heads): vLLM splits the heads over its tensor-parallel GPUs and refuses — the sizes "
        "that split them are [1, 2, 4, 28]")
    undeclared = ModelSpec.from_entry("q", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"})
    assert verl._heads_problem(undeclared, 8) is None  # nothing to check it with
