"""The paper's GradAlign scenarios on the verl backend (config/campaigns/gradalign_verl.yaml over config/paper.yaml)
plan through the Slurm profile: the three campaigns, the selection round's command in the summary, and the train job's
resources. The paper's data files cannot be downloaded here, so the corpus files are stand-ins of their sizes (DAPO-Math
17k, WebInstruct-verified capped at 20k, Countdown 4k) in the corpus row schema; the dry run reads their row counts."""
import json
import os
import subprocess
from pathlib import Path

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
STAND_INS = {"dapo_math_17k.jsonl": (17_000, "What is {i} + 1?", "{j}"),
             "webinstruct_verified_20k.jsonl": (20_000, "A body moves {i} m in 1 s. Its speed in m/s?", "{i}"),
             "countdown_4k.jsonl": (4_000, "Using {i} and 1, make {j}.", "{i} + 1")}


def _dry_run(workdir: Path, *overlays: str) -> subprocess.CompletedProcess:
    corpus = workdir / "data" / "corpus"
    corpus.mkdir(parents=True)
    for name, (rows, prompt, answer) in STAND_INS.items():
        lines = (json.dumps({"prompt": prompt.format(i=i, j=i + 1), "answer": answer.format(i=i, j=i + 1)})
                 for i in range(rows))
        (corpus / name).write_text("\n".join(lines) + "\n")
    return forked_snakemake.snakemake(
        ["-n", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
         "--profile", "profiles/slurm", "--configfile", "config/paper.yaml", "config/campaigns/gradalign_verl.yaml",
         *overlays],
        cwd=REPO, timeout=300, env={**os.environ, "SLURM_CONF": os.devnull})


def _row(summary: str, rule: str) -> list[str]:
    return next(line.split() for line in summary.splitlines() if line.split()[:1] == [rule])


def test_the_verl_scenarios_plan_their_rounds_and_resources(tmp_path):
    result = _dry_run(tmp_path)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    summary = result.stderr
    # S1 and S3 on Qwen3-8B-Base, S2 on Qwen2.5-Math-1.5B: 3 campaigns × 5 methods × 3 seeds
    for campaign, model, regime in (("noisy_rewards", "qwen3-8b-base", "noisy50"),
                                    ("unbalanced_pool", "qwen2.5-math-1.5b", "countdown_unbalanced"),
                                    ("low_utility", "qwen3-8b-base", "low_utility50")):
        assert f"campaign {campaign}: 1 model(s) × 1 regime(s) × 1 step budget(s) × 5 method(s) × 3 seed(s)" in summary
        assert f"models {model}; regimes {regime}" in summary
    assert "45 distinct training runs in 3 study cells" in summary
    # the round runs in the train job between verl segments: vLLM rollouts at the round's sampling settings, then
    # the gradients on the round's weights
    round_line = next(line for line in summary.splitlines() if "verl selection round" in line)
    assert "python -m dataflex_rl.backends.verl.round_job" in round_line
    assert "max_tokens=8192" in round_line and "top_p=1.0" in round_line and "AutoModelForCausalLM" in round_line
    assert ("candidates_per_round=5120, rollouts_candidate=32, rollouts_validation=128, score_temperature=0.7, "
            "selection_ratio=20, steps_per_round=10, validation_size=100") in summary
    # 45 train jobs of 8 GPUs × 2,880 min = 17,280 GPU-hours, × 40 CPUs = 86,400 CPU-hours
    assert _row(summary, "train")[:10] == ["train", "45", "8", "40", "320000", "8", "2880", "17,280.0", "86,400.0",
                                           "gpu"]
    # every model that trains a prompt selection had its round's memory checked: none is left unchecked
    assert "memory was not checked" not in summary
    assert "were not counted" not in summary  # the activations too: the models' shapes are declared
    # S2's model holds 4096 positions (declared: its config.json is not cached here): its own lengths fill them
    assert ("qwen2.5-math-1.5b (context 4096 declared) at its own lengths, over the study's in the commands below: "
            "training.max_new_tokens 3072, evaluation.max_new_tokens 3072") in summary
    # S3's solve rates: 1 + 17,000 + 20,000 + 4,000 prompts in ⌈41,001 / 384⌉ = 107 jobs, each at most 384 prompts
    # × K = 32 × 8192 tokens = 100,663,296 tokens at the H200's estimated worst-case 4,200 tokens/s (the campaign's
    # solve_rates gpu_model): 399.5 → 400 min, + 15 to start = 415; 107 jobs of one GPU: 740.1 GPU-hours, × 8 CPUs
    # 5,920.7 CPU-hours (at the 5,000 tokens/s assumed before: 41 jobs of 1,024 prompts, 910 min each; 1,024 prompts
    # at an A100-80GB's 1,300 would need 3,456 min, beyond a 1-day partition)
    assert ("384 prompts at most (one of 107 jobs over the corpus's 41,001 at most: corpus.items_per_domain 1 over 1 "
            "domain(s)") in summary
    assert ("= 100,663,296 tokens at 4,200 tokens/s of one vLLM engine (gpu_model h200's estimate;" in summary
            and "= 415 min" in summary)
    assert _row(summary, "solve_rates")[:10] == ["solve_rates", "107", "8", "8", "64000", "1", "415", "740.1",
                                                 "5,920.7", "gpu"]
    assert _row(summary, "solve_rate_table")[:3] == ["solve_rate_table", "1", "1"]
    assert _row(result.stdout, "solve_rates") == ["solve_rates", "107"]  # what Snakemake plans: one job a chunk


def _refused_with(tmp_path: Path, overlay: str) -> str:
    """The shipped scenario's dry run with the config `overlay` on top, which it must refuse: its output."""
    (tmp_path / "overlay.yaml").write_text(overlay)
    result = _dry_run(tmp_path, str(tmp_path / "overlay.yaml"))
    assert result.returncode == 1, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_s2_at_the_studys_lengths_is_refused_for_its_4096_positions(tmp_path):
    """The shipped scenario with S2's model at the study's lengths (1024 prompt + 8192 response tokens, the scorer's
    1024 + 4096): both engines are refused at dry run, naming the model, the sum and the fix."""
    output = _refused_with(tmp_path, "models:\n  qwen2.5-math-1.5b:\n    training: {max_new_tokens: 8192}\n"
                                     "    evaluation: {max_new_tokens: 4096}\n")
    declared = ("'Qwen/Qwen2.5-Math-1.5B' (models.qwen2.5-math-1.5b.context, as declared: its config.json cannot be "
                "read here)")
    assert (f"models.qwen2.5-math-1.5b rollout and selection round: vLLM's max_model_len 9216 (1024 prompt tokens "
            f"(verl's data.max_prompt_length) + models.qwen2.5-math-1.5b.training.max_new_tokens 8192) is more than "
            f"the 4096 positions of {declared}, which vLLM refuses at engine start; set "
            f"models.qwen2.5-math-1.5b.training.max_new_tokens to at most 3072") in output
    assert (f"models.qwen2.5-math-1.5b scoring: vLLM's max_model_len 5120 (the scorer's 1024 prompt tokens + "
            f"models.qwen2.5-math-1.5b.evaluation.max_new_tokens 4096) is more than the 4096 positions of {declared}, "
            f"which vLLM refuses at engine start; set models.qwen2.5-math-1.5b.evaluation.max_new_tokens to at most "
            f"3072") in output
    assert "qwen3-8b-base rollout" not in output and "qwen3-8b-base scoring" not in output


def test_qwen3_8b_at_the_released_probe_micro_batch_is_refused_from_its_declared_shape(tmp_path):
    """Its config.json is not cached here: the declared architecture gives the round's activations, and micro_batch 8,
    the released scorer's, needs an estimated 132.5 GiB of the H200's 125.1 (90% of 141 GB counted as 139 GiB:
    config/campaigns/gradalign_verl.yaml)."""
    output = _refused_with(tmp_path, "models:\n  qwen3-8b-base:\n    probe: {gpu_memory_gb: 141, parameters: "
                                     "8190735360, micro_batch: 8}\n")
    assert ("models.qwen3-8b-base.probe.micro_batch: 8, but a selection round's backward passes need an estimated "
            "132.5 GiB on one GPU, beyond 125.1 GiB (90% of models.qwen3-8b-base.probe.gpu_memory_gb 141 GB, counted as "
            "139 GiB)") in output
    assert "lower models.qwen3-8b-base.probe.micro_batch to 6 (the largest that fits)" in output


def test_the_h200_models_on_h100s_are_refused_for_their_declared_memory(tmp_path):
    """The shipped scenario's train jobs sent to H100s (gpu_model h100 for both models: the train rule has one): the
    declared 141 GB is refused for each model, naming both sizes and the fix, before any job is planned."""
    output = _refused_with(tmp_path, "models:\n  qwen3-8b-base:\n    resources: {train: {gpu_model: h100}}\n"
                                     "  qwen2.5-math-1.5b:\n    resources: {train: {gpu_model: h100}}\n")
    for model in ("qwen3-8b-base", "qwen2.5-math-1.5b"):
        assert (f"models.{model}.probe.gpu_memory_gb: 141, but the train job asks for gpu_model 'h100' (80 GB: 79.11 "
                f"GiB as CUDA reports it, nvidia-smi 81,559 MiB), below the 141 GB, counted as 139 GiB — ask for a "
                f"larger type (models.{model}.resources.train.gpu_model: h200) or lower "
                f"models.{model}.probe.gpu_memory_gb to at most 80") in output
    assert "Building DAG of jobs" not in output
