"""The verl train job's memory at the rollout's wake-up (dataflex_rl/backends/verl/train_memory.py), on hand-computed
cases: 16 bytes a parameter of FSDP state over the GPUs, 1.5 GiB of context, vLLM's share of the GPU. The figures
match the estimates of the GPU-path review (the paper's 7B at 0.85 on 80 GB GPUs ≈ 81–84 GiB; the one-GPU 1.5B at 0.4
≈ 57 GiB; Qwen3-8B on H200s ≈ 135–137 of 141). A declared size counts 2 GiB less (dataflex_rl/backends/verl/
gpu_types.py): an 80 GB GPU as 78 GiB, a 141 GB H200 as 139."""
import pytest

from dataflex_rl.backends.verl.train_memory import fsdp_gib, largest_utilization, rollout_memory_errors

QWEN25_7B, QWEN25_15B, QWEN3_8B = 7_615_616_512, 1_543_714_304, 8_190_735_360


def test_the_fsdp_state_is_sixteen_bytes_a_parameter_over_the_gpus():
    assert fsdp_gib(QWEN25_7B, 8) == pytest.approx(16 * 7_615_616_512 / 8 / 2**30)  # 14.18 GiB
    assert fsdp_gib(QWEN25_7B, 8) == pytest.approx(14.18, abs=0.01)
    assert fsdp_gib(QWEN25_15B, 1) == pytest.approx(23.0, abs=0.01)


def test_the_papers_7b_at_the_released_share_does_not_fit_80_gb_gpus():
    (refusal,) = rollout_memory_errors("models.qwen2.5-7b-base", QWEN25_7B, 8, 0.85, 80)
    # 14.18 + 1.5 + 0.85 · 78 = 81.98 GiB; the share that fits: (78 − 14.18 − 1.5) / 78 = 0.799 → 0.79
    assert "8 GPUs of 80 GB, counted as 78 GiB (models.qwen2.5-7b-base.probe.gpu_memory_gb; " in refusal
    assert "14.2 GiB) and 1.5 GiB of context when vLLM wakes its 0.85 of the GPU: 82.0 GiB in all" in refusal
    assert "set models.qwen2.5-7b-base.rollout.gpu_memory_utilization to at most 0.79" in refusal
    assert largest_utilization(QWEN25_7B, 8, 78) == 0.79
    assert rollout_memory_errors("m", QWEN25_7B, 8, 0.79, 80) == []  # 77.30 GiB of 78
    assert rollout_memory_errors("m", QWEN25_7B, 8, 0.80, 80) != []  # 78.08 GiB, above 78
    assert rollout_memory_errors("m", QWEN25_7B, 8, 0.85, 141) == []  # an H200: 133.8 GiB of 139


@pytest.mark.parametrize("parameters, gpus, share, memory", [
    (QWEN25_15B, 1, 0.4, 80),  # config/one_gpu.yaml: 23.0 + 1.5 + 31.2 = 55.7 GiB of 78
    (QWEN3_8B, 8, 0.85, 141),  # the GradAlign scenarios on H200s: 15.3 + 1.5 + 118.2 = 135.0 GiB of 139
    (QWEN25_7B, 8, 0.6, 80),  # config/paper.yaml: 14.2 + 1.5 + 46.8 = 62.5 GiB of 78
    (QWEN25_7B, 4, 0.6, 80),  # the same on 4 GPUs: 28.4 + 1.5 + 46.8 = 76.7 GiB of 78
])
def test_the_shipped_gpu_settings_fit(parameters, gpus, share, memory):
    assert rollout_memory_errors("m", parameters, gpus, share, memory) == []


def test_a_model_too_large_for_its_gpus_asks_for_more_of_them():
    (refusal,) = rollout_memory_errors("models.big", QWEN3_8B, 1, 0.3, 80)  # 122 GiB of state alone
    assert "give the train job more GPUs (the FSDP state is sharded over them) or larger ones" in refusal
