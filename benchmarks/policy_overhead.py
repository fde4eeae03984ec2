"""Data-policy overhead per GRPO step: each of the 13 configurations' policy calls on recorded batches, against the
embedded step they sit in (the goal: ≤ 2% of a step for every signal-based policy).

One process. First the embedded trainer runs `--steps` real GRPO steps of `baseline` with the default study's model
shape, recipe and corpus sources (a model freshly built from `config/config.yaml`'s shape; the step's compute does not
depend on its weights), and every batch the policy driver weighs is recorded (rewards, token mask, advantages, old
log-probs, domains, prompt ids: what `PolicyDriver.weigh` receives). Then, for each configuration of
`config/policies.yaml`, a fresh driver (same seed) replays those batches: `draw` (the prompt stream or the mixture's
draw), `weigh`, `observe` and `metrics`, the calls a step makes; the configurations alternate over `--repeats`
passes, and each figure is the median over passes of the mean time per step. Their ratio to the median step time
(baseline's own policy calls included) is the overhead.

    python benchmarks/policy_overhead.py               # 20 recorded steps, 5 passes
    python benchmarks/policy_overhead.py --smoke       # 2 steps, 1 pass: proves the script runs
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch
import yaml

from dataflex_rl.backends.embedded.model import build_model, save_model, train_tokenizer
from dataflex_rl.backends.embedded.settings import ModelShape
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.policies.driver import PolicyDriver
from dataflex_rl.study.resolved import Study
from dataflex_rl.corpus.build import build_corpus

REPO = Path(__file__).resolve().parents[1]


def _study() -> Study:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["methods"] = yaml.safe_load((REPO / "config" / "policies.yaml").read_text())["methods"]
    return Study.from_config(config)


def _recorded_steps(study: Study, corpus: pd.DataFrame, steps: int, root: Path) -> tuple[list[float], list[dict]]:
    """(seconds per step, the batches weighed) of `steps` embedded baseline steps."""
    shape = ModelShape(**study.models[next(iter(study.models))].settings["shape"])
    tokenizer = train_tokenizer(corpus["prompt"].tolist() + corpus["answer"].tolist(), shape.vocab_size)
    save_model(build_model(shape, tokenizer, seed=0), tokenizer, root / "model")
    trainer = EmbeddedGRPOTrainer(root / "model", corpus, study.methods["baseline"], seed=1,
                                  settings=replace(study.training, steps=steps), template=study.template)
    batches, weigh = [], trainer.driver.weigh

    def recording(rewards, token_mask, advantages, old_logprobs, domains, prompt_ids):
        batches.append({"rewards": rewards, "token_mask": token_mask, "advantages": advantages,
                        "old_logprobs": old_logprobs, "domains": list(domains), "prompt_ids": list(prompt_ids)})
        return weigh(rewards, token_mask, advantages, old_logprobs, domains, prompt_ids)

    trainer.driver.weigh = recording
    seconds = [trainer.train_step()["seconds"] for _ in range(steps)]
    return seconds, batches


def _policy_seconds(method, domains: list[str], batches: list[dict], prompts: int) -> float:
    """Mean seconds per step of one configuration's calls over the recorded batches, with a fresh driver."""
    driver = PolicyDriver(method, domains, seed=1)
    started = time.perf_counter()
    for step, batch in enumerate(batches):
        driver.draw(prompts, step)
        loss = driver.weigh(**batch)
        driver.observe(loss.batch)
        driver.metrics(loss)
    return (time.perf_counter() - started) / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="embedded baseline steps to record")
    parser.add_argument("--repeats", type=int, default=5, help="alternating passes over the configurations")
    parser.add_argument("--smoke", action="store_true", help="2 steps, 1 pass")
    args = parser.parse_args()
    steps, repeats = (2, 1) if args.smoke else (args.steps, args.repeats)
    torch.set_num_threads(1)  # as a train job of the default study runs (threads_per_job)

    study = _study()
    sources = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["corpus"]["sources"]
    corpus, _ = build_corpus(sources, items_per_domain=200, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        step_seconds, batches = _recorded_steps(study, corpus, steps, Path(tmp))
    step = statistics.median(step_seconds)
    domains = corpus["domain"].tolist()
    times: dict[str, list[float]] = {name: [] for name in study.methods}
    for _ in range(repeats):
        for name, method in study.methods.items():
            times[name].append(_policy_seconds(method, domains, batches, study.training.prompts_per_step))

    print(f"{steps} recorded embedded steps ({study.training.prompts_per_step} prompts × K={study.training.rollouts}, "
          f"≤ {study.training.max_new_tokens} tokens, 1 thread): median step {step * 1000:.1f} ms; policy calls per "
          f"step (draw, weigh, observe, metrics), median of {repeats} alternating passes:")
    print("| configuration | family | ms per step | share of the step |")
    print("|---|---|---|---|")
    for name, method in study.methods.items():
        median = statistics.median(times[name])
        print(f"| {name} | {CATALOGUE[method.policy].family} | {median * 1000:.3f} | {median / step:.2%} |")


if __name__ == "__main__":
    main()
