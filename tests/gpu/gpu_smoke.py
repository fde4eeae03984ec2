"""The verl backend end to end on one GPU, in stages that tests/gpu/gpu_smoke.sh runs in turn (each prints what it
checked, `[ok]` or `[FAILED]`, and stops at the first failure):

  train <out>        a tiny Qwen2 built locally (the embedded base builder, a content-only chat template added so
                     verl's dataset can apply one), a small procedural corpus, and 2 verl steps of the `difffilter`
                     selection through our train job (dataflex_rl.jobs.train_run); the metrics file has both steps
  score <out> run    the merge job on the run's checkpoint, then vLLM on 8 benchmark prompts, twice in other orders:
                     every record has finish_reason, the vLLM version and TP, and the answers do not depend on the batch
  score <out> base   the same for the untrained base, loaded from the model's `path` (one vLLM engine per process)
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import yaml

from dataflex_rl.backends.base import get_backend
from dataflex_rl.backends.embedded.base_model import build_base_model
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.backends.verl.merge import merge_run
from dataflex_rl.evaluate.scoring import score_items
from dataflex_rl.jobs import train_run
from dataflex_rl.layout import PROVENANCE
from dataflex_rl.study import Study
from dataflex_rl.tasks.corpus import benchmark_items, build_corpus

REPO = Path(__file__).resolve().parents[2]
# head dim 64 (vLLM's attention kernels take it); positions for vLLM's 1024 prompt tokens + the answer
SHAPE = ModelShape(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=2048, vocab_size=512)
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
MAX_NEW_TOKENS = 16


def check(what: str, ok: bool, detail: str = "") -> None:
    print(f"[{'ok' if ok else 'FAILED'}] {what}" + (f": {detail}" if detail else ""), flush=True)
    if not ok:
        sys.exit(1)


def study(out: Path) -> Study:
    config = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    config["models"] = {"tiny": {"backend": "verl", "path": str(out / "base")}}
    config["training"].update(steps=2, prompts_per_step=4, rollouts=5, max_new_tokens=MAX_NEW_TOKENS,
                              checkpoint_every=1)
    config["methods"] = {"difffilter": {"policy": "difffilter"}}
    config["seeds"] = [1]
    config["evaluation"].update(max_new_tokens=MAX_NEW_TOKENS)
    return Study.from_config(config)


def train(out: Path) -> None:
    spec = study(out)
    corpus, _ = build_corpus(list(spec.corpus.sources), 60, seed=1)
    corpus.to_parquet(out / "corpus.parquet")
    build_base_model(out / "corpus.parquet", out / "base", SHAPE, WarmupSettings(steps=20, batch_size=16,
                                                                                  learning_rate=2e-3),
                     spec.template, progress=False)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out / "base")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out / "base")
    check("tiny base model built locally", (out / "base/config.json").is_file(), str(out / "base"))

    (run,) = spec.runs
    train_run(spec.train_job(run), spec.train_slice(run), base=None, corpus=out / "corpus.parquet",
              checkpoint_every=1, out_model=out / "run/model", out_metrics=out / "run/metrics.parquet",
              out_provenance=out / "run" / PROVENANCE, state_dir=out / "run/state", threads=4, gpus=1)
    metrics = pd.read_parquet(out / "run/metrics.parquet")
    check("verl trained 2 steps of difffilter; metrics written", len(metrics) == 2,
          f"{len(metrics)} rows, columns {sorted(metrics.columns)}")
    kept = [column for column in metrics.columns if column.endswith("kept_fraction")]  # PolicyDriver.metrics
    check("the selection's kept fraction is in the metrics", len(kept) == 1 and metrics[kept[0]].between(0, 1).all(),
          f"{kept}: {metrics[kept[0]].tolist() if kept else None}")


def score(out: Path, which: str) -> None:
    spec = study(out)
    (run,) = spec.runs
    model_dir = None
    if which == "run":
        model_dir = out / "run/merged"
        merge_run(spec.train_slice(run), model_dir=out / "run/model", model_provenance=out / "run" / PROVENANCE,
                  out_dir=model_dir)
        check("merged to a Hugging Face directory", any(model_dir.glob("*.safetensors")), str(model_dir))
    generator = get_backend("verl").open_generator(spec.score_job("tiny")["model"], model_dir=model_dir, threads=4,
                                                   gpus=1)
    items = benchmark_items("basic_arithmetic", n_items=8, seed=1000)
    scores = score_items(generator, items, spec.template, max_new_tokens=MAX_NEW_TOKENS)
    columns = {"finish_reason", "vllm_version", "tensor_parallel_size"}
    check(f"vLLM scored 8 prompts ({which})", len(scores) == 8 and columns <= set(scores.columns),
          f"finish_reason {scores['finish_reason'].value_counts().to_dict()}, vllm "
          f"{scores['vllm_version'].iloc[0]}, TP {scores['tensor_parallel_size'].iloc[0]}, "
          f"{int(scores['correct'].sum())}/8 correct")
    reordered = score_items(generator, items.iloc[::-1].head(5), spec.template, max_new_tokens=MAX_NEW_TOKENS)
    same = scores.set_index("prompt_id").loc[reordered["prompt_id"], "response"].tolist() == \
        reordered["response"].tolist()
    check("greedy answers are the same in another batch (VLLM_BATCH_INVARIANT=1)", same)
    print(scores[["prompt_id", "response", "length", "finish_reason", "correct"]].to_string(), flush=True)


if __name__ == "__main__":
    stage, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    train(folder) if stage == "train" else score(folder, sys.argv[3])
