"""The verl backend end to end on one GPU, offline, in stages that tests/gpu/gpu_smoke.sh runs in turn after its
environment check (dataflex_rl.backends.verl.gpu_stack). Each stage prints one `[ok]` line per thing it checked, or
`[FAILED]` and exits 1 at the first failure. Nothing is downloaded: the model and tokenizer are built here.

  train <out>   a tiny Qwen2 built locally (the embedded base builder, a content-only chat template added so verl's
                dataset can apply one) and 2 verl steps of the `difffilter` selection (Eq. 1: dropped responses leave
                the mask) through our train job, rollout TP 1, gpu_memory_utilization 0.3, enforce_eager (the
                study's models.tiny.rollout), with the trainer's debug dump on (DATAFLEX_RL_DEBUG_DUMP)
  check <out>   the plugin's start-up line in the Ray logs; both steps in verl's raw metrics file with every key the
                launcher maps (launch.VERL_METRICS); the dump shows the update fetched rollout_is_weights and the
                response_mask zeroed for exactly the dropped share of responses
  score <out>   the merge job (safetensors and config.json), then vLLM (enforce_eager, low memory) on 8 prompts and
                on 5 of them reordered: identical greedy answers, finish_reason counts, one response printed whole
  select <out>  prompt selection on verl: 2 rounds of `gradalign` (steps_per_round 1) through our train job, run from
                <out> with a relative state folder, as the real jobs run; the tiny model's template closes a turn
                with a token other than its EOS (tests/vllm_test_model.py). Checks: both round files with their
                kept rows, no saved rollouts left, the round metrics on steps 0 and 1, the rollouts' stop tokens
                (EOS and the turn end)
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pandas as pd
import torch
import yaml

from dataflex_rl.backends.embedded.base_model import build_base_model
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.backends.verl.launch import METRICS_GLOB, VERL_METRICS, read_verl_metrics
from dataflex_rl.backends.verl.scoring import VllmGenerator
from dataflex_rl.backends.verl.trainer import DEBUG_DUMP_VARIABLE, DUMPED_FIELDS
from dataflex_rl.evaluate.scoring import score_items
from dataflex_rl.study.jobs import merge_run, train_run
from dataflex_rl.artefacts.layout import PROVENANCE
from dataflex_rl.study.resolved import Study
from dataflex_rl.corpus.build import benchmark_items, build_corpus

REPO = Path(__file__).resolve().parents[2]
# head dim 64 (vLLM's attention kernels take it); positions for vLLM's 1024 prompt tokens + the answer; 2 heads and
# 1 KV head divide by rollout TP 1
SHAPE = ModelShape(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=2048, vocab_size=512)
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
MAX_NEW_TOKENS = 16
STEPS, PROMPTS, ROLLOUTS = 2, 4, 5
# one small engine on a shared GPU, no CUDA-graph capture (tens of seconds saved at each engine start)
ROLLOUT = {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.3, "enforce_eager": True}
SCORING_ENGINE = {"enforce_eager": True, "gpu_memory_utilization": 0.3}
PLUGIN_LINE = re.compile(r"dataflex_rl plugin registered in (\d+)")  # dataflex_rl/backends/verl/plugin.py


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"[{'ok' if ok else 'FAILED'}] {what}" + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        sys.exit(1)


def study(out: Path, methods=None, base: str | None = None) -> Study:
    """The one-GPU study (config/one_gpu.yaml) cut down to a smoke: its recipe and its one-GPU jobs, with the tiny
    local model in the place of Qwen2.5-1.5B-Instruct (nothing is downloaded), 2 steps of 4 prompts, short answers;
    `methods`: the study's (default: difffilter), `base`: the model's path (default <out>/base)."""
    config = yaml.safe_load((REPO / "config/one_gpu.yaml").read_text())
    (model,) = config["models"].values()
    config["models"] = {"tiny": {"backend": "verl", "path": base or str(out / "base"), "rollout": ROLLOUT,
                                 "resources": model["resources"]}}
    config["training"].update(steps=STEPS, prompts_per_step=PROMPTS, rollouts=ROLLOUTS,
                              max_new_tokens=MAX_NEW_TOKENS, checkpoint_every=1)
    config["methods"] = methods or {"difffilter": {"policy": "difffilter"}}
    config["seeds"] = [1]
    config["evaluation"].update(max_new_tokens=MAX_NEW_TOKENS)
    return Study.from_config(config)


def _build_base(spec: Study, out: Path, folder: Path) -> None:
    """The corpus (60 items a source) in <out>, and the tiny base built on it in `folder`."""
    corpus, _ = build_corpus(list(spec.corpus.sources), 60, seed=1)
    corpus.to_parquet(out / "corpus.parquet")
    build_base_model(out / "corpus.parquet", folder, SHAPE, WarmupSettings(steps=20, batch_size=16,
                                                                            learning_rate=2e-3),
                     spec.template, progress=False)


def train(out: Path) -> None:
    spec = study(out)
    _build_base(spec, out, out / "base")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out / "base")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out / "base")
    check("tiny base model built locally", (out / "base/config.json").is_file(), str(out / "base"))

    os.environ[DEBUG_DUMP_VARIABLE] = str(out / "dump")  # inherited by verl's process and its Ray workers
    (run,) = spec.runs
    train_run(spec.train_job(run), spec.train_slice(run), base=None, corpus=out / "corpus.parquet",
              checkpoint_every=1, out_model=out / "run/model", out_metrics=out / "run/metrics.parquet",
              out_provenance=out / "run" / PROVENANCE, state_dir=out / "run/state", threads=8, gpus=1)
    metrics = pd.read_parquet(out / "run/metrics.parquet")
    check(f"verl trained {STEPS} steps of difffilter; metrics.parquet written", len(metrics) == STEPS,
          f"{len(metrics)} rows, columns {sorted(metrics.columns)}")


def _plugin_lines(ray_logs: Path, since: float) -> list[tuple[Path, str]]:
    """The plugin's start-up lines in the Ray log files written after `since` (not an earlier session's)."""
    lines = []
    for path in sorted(ray_logs.rglob("*")):
        if path.is_file() and path.suffix in {".out", ".err", ".log"} and path.stat().st_mtime >= since:
            lines += [(path, m.group(0)) for m in PLUGIN_LINE.finditer(path.read_text(errors="replace"))]
    return lines


def check_run(out: Path, ray_logs: Path) -> None:
    found = _plugin_lines(ray_logs, since=(out / "base/config.json").stat().st_mtime)
    check("the plugin registered in a Ray worker (its start-up line in the Ray logs)", bool(found),
          f"{found[0][1]!r} in {found[0][0]}" if found else f"no line matching /{PLUGIN_LINE.pattern}/ under "
                                                            f"{ray_logs}")

    files = sorted((out / "run/state").rglob(METRICS_GLOB))
    steps = read_verl_metrics(files)
    check(f"verl's raw metrics ({', '.join(map(str, files))}) hold steps 1..{STEPS}",
          sorted(steps) == list(range(1, STEPS + 1)), f"steps {sorted(steps)}")
    for step in range(1, STEPS + 1):
        data = steps[step].data
        absent = [key for key in VERL_METRICS.values() if key not in data]
        check(f"step {step} has every key the launcher maps", not absent,
              f"missing {absent}" if absent else ", ".join(f"{k}={data[k]:.4g}" for k in VERL_METRICS.values()))
        kept = data.get("dataflex/kept_fraction")
        check(f"step {step}: the selection's kept fraction is in [0, 1]", kept is not None and 0 <= kept <= 1,
              f"dataflex/kept_fraction={kept}")

        dump_file = out / "dump" / f"update_actor_step{step}.pt"
        check(f"step {step}: the actor update's debug dump exists", dump_file.is_file(), str(dump_file))
        dump = torch.load(dump_file, weights_only=False)
        check(f"step {step}: the update fetched {DUMPED_FIELDS}", set(DUMPED_FIELDS) <= set(dump["fields"]),
              f"the update's fields: {dump['fields']}")
        real = [i for i, padding in enumerate(dump["padding"]) if not padding]
        zeroed = sum(int(dump["response_mask"][i].sum()) == 0 for i in real)
        expected = round((1 - kept) * PROMPTS * ROLLOUTS)
        weighted_zeroed = all(not bool(dump["rollout_is_weights"][i].any()) for i in real
                              if int(dump["response_mask"][i].sum()) == 0)
        check(f"step {step}: response_mask zeroed for the dropped share", len(real) == PROMPTS * ROLLOUTS and
              zeroed == expected and weighted_zeroed,
              f"{zeroed} of {len(real)} responses zeroed, (1 − kept fraction)·G·K = {expected}; "
              f"{len(dump['padding']) - len(real)} padding sample(s)")


def score(out: Path) -> None:
    spec = study(out)
    (run,) = spec.runs
    model_dir = out / "run/merged"
    merge_run(spec.train_slice(run), model=run.model, model_dir=out / "run/model",
              model_provenance=out / "run" / PROVENANCE, out_dir=model_dir)
    weights = sorted(p.name for p in model_dir.glob("*.safetensors"))
    check("merged to a Hugging Face directory", bool(weights) and (model_dir / "config.json").is_file(),
          f"{model_dir}: {weights} and config.json")

    generator = VllmGenerator.open(str(model_dir), gpus=1, engine_options=SCORING_ENGINE)
    items = benchmark_items("basic_arithmetic", n_items=8, seed=1000)
    scores = score_items(generator, items, spec.template, max_new_tokens=MAX_NEW_TOKENS)
    counts = scores["finish_reason"].value_counts().to_dict() if "finish_reason" in scores else {}
    check("vLLM scored 8 prompts; finish_reason recorded for each", len(scores) == 8 and sum(counts.values()) == 8,
          f"finish_reason {counts}, vllm {scores['vllm_version'].iloc[0]}, "
          f"TP {scores['tensor_parallel_size'].iloc[0]}, {int(scores['correct'].sum())}/8 correct")
    reordered = score_items(generator, items.iloc[::-1].head(5), spec.template, max_new_tokens=MAX_NEW_TOKENS)
    first = scores.set_index("prompt_id").loc[reordered["prompt_id"], "response"].tolist()
    check("greedy answers are identical with the batch reordered (VLLM_BATCH_INVARIANT=1)",
          first == reordered["response"].tolist(), f"{sum(a == b for a, b in zip(first, reordered['response']))}/5 "
                                                   f"identical")
    one = scores.iloc[0]
    print(f"one full response ({one['prompt_id']}, {one['length']} tokens, finish_reason {one['finish_reason']}):\n"
          f"{one['response']!r}", flush=True)


# 2 rounds of 8 candidates (4 kept: one step's prompts), 4 rollouts each, 4 validation prompts
SELECTION = {"gradalign": {"policy": "gradalign", "params": {
    "candidates_per_round": 8, "selection_ratio": 2, "steps_per_round": 1, "rollouts_candidate": 4,
    "rollouts_validation": 4, "validation_size": 4}}}


def select(out: Path) -> None:
    from dataflex_rl.backends.verl.overrides import RunFiles
    from dataflex_rl.backends.verl.selection_rounds import ROUNDS_FOLDER, read_round

    sys.path.insert(0, str(REPO / "tests"))
    from vllm_test_model import EOS, TURN_END, relabel_turn_end

    folder = out / "select"
    folder.mkdir(parents=True, exist_ok=True)
    os.chdir(folder)  # the jobs run from the workdir, their state folder relative to it
    spec = study(folder, SELECTION, base="base")
    _build_base(spec, folder, folder / "base")
    relabel_turn_end(folder / "base")
    (run,) = spec.runs
    state = Path("run/state")
    train_run(spec.train_job(run), spec.train_slice(run), base=None, corpus=folder / "corpus.parquet",
              checkpoint_every=1, out_model=Path("run/model"), out_metrics=Path("run/metrics.parquet"),
              out_provenance=Path("run") / PROVENANCE, state_dir=state, threads=8, gpus=1)
    (key,) = [p for p in state.iterdir() if p.is_dir()]  # the run's state, keyed by its settings
    rounds = key / ROUNDS_FOLDER
    for index in range(STEPS):
        kept = read_round(rounds / f"round_{index}.pt")["selection"]["round"]["kept"]
        check(f"round {index} written with its kept rows", len(kept) == 4, f"kept {kept}")
    leftover = sorted(str(p) for p in rounds.glob("*.rollouts"))
    check("no saved rollouts left once the rounds are written", not leftover, ", ".join(leftover))
    metrics = pd.read_parquet("run/metrics.parquet")
    check("the round metrics on steps 0 and 1", metrics["round"].tolist() == [0, 1],
          f"round {metrics['round'].tolist()}, kept {metrics['round_kept'].tolist()}")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("base")
    stops = yaml.safe_load((RunFiles.in_state(key).generation_config_dir / "generation_config.json").read_text())
    wanted = [tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids(TURN_END)]
    check("the rollouts stop at EOS and at the template's turn end", stops["eos_token_id"] == wanted,
          f"generation config eos_token_id {stops['eos_token_id']}, EOS and turn end {wanted}")


if __name__ == "__main__":
    stage, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    if stage == "train":
        train(folder)
    elif stage == "check":
        check_run(folder, Path(sys.argv[3]))
    elif stage == "select":
        select(folder.resolve())
    else:
        score(folder)
