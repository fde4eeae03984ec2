"""The embedded GRPO step against TRL's GRPOTrainer: same model, tokenizer, prompts, K, completion length, threads.

    python benchmarks/grpo_step.py --trl-python ~/venv-trl/bin/python            # 3 alternating rounds of 10 steps
    python benchmarks/grpo_step.py --trl-python ~/venv-trl/bin/python --smoke    # 1 round of 1 step: proves it runs
    python benchmarks/grpo_step.py --trl-python ~/venv-trl/bin/python --against REV  # also the embedded step of REV

TRL is not a dependency of the package. Its side runs in a separate environment that has the project's own packages
and `pip install trl` on top (1.16 needs transformers >= 4.56.2; this project's transformers satisfies it, so TRL runs
on the very torch and transformers builds the embedded side uses):

    python -m venv ~/venv-trl    # with the Python that .venv was made with
    echo "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \\
        > "$(~/venv-trl/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/project.pth"
    ~/venv-trl/bin/pip install trl

(With `pip install trl transformers==5.24.0` instead, the same recipe makes a TRL environment on the newest transformers
TRL supports, the embedded side staying on the project's.) The two sides draw their prompts from the same corpus with
their own samplers, so a step's time varies with the longest prompt it drew; medians over many steps compare them.

One model of the default study's shape (config/config.yaml) is built with a tokenizer trained on a corpus of its
sources; both sides train that model on that corpus's prompts rendered with the study's template: 12 prompts × K = 5
rollouts per step, ≤ 8 new tokens, temperature 1, learning rate, KL coefficient and clip of the default recipe, a
reference model, one optimiser step per batch. Each round runs each side in a fresh process (alternating which goes
first), `--warmup` steps then `--steps` timed ones; the figures are medians over rounds of each process's median step
and its peak resident set (VmHWM). The step split comes from timers wrapped around each side's own stages.

TRL's best CPU configuration, as used here: fp32 (bf16=False: GRPOConfig defaults to bf16, ~15× slower on CPU),
gradient_checkpointing=False (its default is True), use_cpu, no vLLM, no logging or saving during the timed steps,
loss_type "grpo" (per-sequence token mean, then the mean over sequences: the embedded default's aggregation), beta
0.01, epsilon 0.2, num_iterations 1 (so no old-log-prob pass), transformers' `generate` with its KV cache.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import yaml

from embedded_memory import peak_mb
from tables_from_records import extract_package

REPO = Path(__file__).resolve().parents[1]
STAGES = ("generation", "rewards", "reference forward", "policy forward", "backward", "optimiser", "policy")


def _study():
    from dataflex_rl.study.resolved import Study

    return Study.from_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))


def _build(root: Path) -> None:
    """The shared inputs: the corpus (parquet) and a model of the default study's shape with its tokenizer."""
    from dataflex_rl.backends.embedded.model import build_model, save_model, train_tokenizer
    from dataflex_rl.backends.embedded.settings import ModelShape
    from dataflex_rl.corpus.build import build_corpus

    study = _study()
    sources = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["corpus"]["sources"]
    corpus, _ = build_corpus(sources, items_per_domain=200, seed=1)
    corpus.to_parquet(root / "corpus.parquet")
    shape = ModelShape(**study.models[next(iter(study.models))].settings["shape"])
    tokenizer = train_tokenizer(corpus["prompt"].tolist() + corpus["answer"].tolist(), shape.vocab_size)
    save_model(build_model(shape, tokenizer, seed=0), tokenizer, root / "model")


def _clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(started: tuple[float, float]) -> tuple[float, float]:
    """(wall-clock, CPU) seconds since `started`: the CPU time of the process is the steadier figure on a shared
    machine (one torch thread: it is the step's work, less what other jobs' load adds to the wall clock)."""
    return tuple(now - then for now, then in zip(_clocks(), started))


class Split:
    """Seconds per stage of the current step, from wrappers around the stages' functions."""

    def __init__(self):
        self.current = dict.fromkeys(STAGES, 0.0)

    def wrap(self, owner, name: str, stage) -> None:
        """Time `owner.name`; `stage` is a stage name or a function of the call's arguments returning one."""
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                key = stage if isinstance(stage, str) else stage(*args, **kwargs)
                self.current[key] += time.perf_counter() - started

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        taken, self.current = self.current, dict.fromkeys(STAGES, 0.0)
        return taken


def _ours(root: Path, steps: int, timed_stages: bool = True) -> tuple[list[float], list[dict]]:
    """`timed_stages`: wrap the working tree's stage functions (False for a revision timed with --against, whose
    functions may differ: its split reads all zero and only its step and peak count)."""
    import pandas as pd

    from dataflex_rl.backends.embedded import trainer as module

    study = _study()
    trainer = module.EmbeddedGRPOTrainer(root / "model", pd.read_parquet(root / "corpus.parquet"),
                                         study.methods["baseline"], seed=1,
                                         settings=replace(study.training, steps=steps), template=study.template)
    split = Split()
    if timed_stages:
        _wrap_stages(split, module, trainer)
    seconds, splits = [], []
    for _ in range(steps):
        started = _clocks()
        trainer.train_step()
        seconds.append(_since(started))
        splits.append(split.take())
    return seconds, splits


def _wrap_stages(split: Split, module, trainer) -> None:
    import torch

    split.wrap(module, "prefill", "policy forward")  # the policy's prompts, which the rollouts continue from too
    split.wrap(module, "decode_from", "generation")
    split.wrap(module, "rollout_rewards", "rewards")
    split.wrap(module, "continuation_logprobs", "policy forward")
    split.wrap(module, "response_logprobs", "reference forward")
    split.wrap(torch.Tensor, "backward", "backward")
    split.wrap(trainer.optimiser, "step", "optimiser")
    for call in ("draw", "weigh", "observe", "metrics"):
        split.wrap(trainer.driver, call, "policy")


def _trl(root: Path, steps: int) -> tuple[list[float], list[dict]]:
    import pandas as pd
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from dataflex_rl.backends.embedded.model import load_model
    from dataflex_rl.corpus.prompting import render_prompt
    from dataflex_rl.verify.verifiers import reward

    study = _study()
    s = study.training
    model, tokenizer = load_model(root / "model")
    items = pd.read_parquet(root / "corpus.parquet").to_dict("records")
    dataset = Dataset.from_list([{"prompt": render_prompt(item["prompt"], study.template, tokenizer), "row": row}
                                 for row, item in enumerate(items)])

    def verifier(prompts, completions, row, **_):
        return [reward(completion, items[r]) for completion, r in zip(completions, row)]

    seconds, splits = [], []
    split = Split()

    class Timer(TrainerCallback):
        def on_step_begin(self, *_, **__):
            self.started = _clocks()

        def on_pre_optimizer_step(self, *_, **__):
            self.optimiser = time.perf_counter()

        def on_optimizer_step(self, *_, **__):
            split.current["optimiser"] += time.perf_counter() - self.optimiser

        def on_step_end(self, *_, **__):
            seconds.append(_since(self.started))
            splits.append(split.take())

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out, max_steps=steps, per_device_train_batch_size=s.prompts_per_step * s.rollouts,
            num_generations=s.rollouts, max_completion_length=s.max_new_tokens, temperature=s.temperature,
            learning_rate=s.learning_rate, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
            beta=s.kl_coef, epsilon=s.clip_low, epsilon_high=s.clip_high, max_grad_norm=s.grad_clip,
            loss_type="grpo", num_iterations=1, bf16=False, fp16=False, gradient_checkpointing=False, use_cpu=True,
            dataloader_num_workers=0, dataloader_pin_memory=False, logging_steps=10 ** 6, save_strategy="no",
            report_to="none", disable_tqdm=True, log_completions=False, seed=1, top_k=0, top_p=1.0)
        trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=verifier, args=config,
                              train_dataset=dataset, callbacks=[Timer()])
        split.wrap(trainer, "_generate_single_turn", "generation")
        split.wrap(trainer, "_calculate_rewards", "rewards")
        split.wrap(trainer, "_get_per_token_logps_and_entropies",
                   lambda model, *a, **k: "reference forward" if model is trainer.ref_model else "policy forward")
        split.wrap(trainer.accelerator, "backward", "backward")
        trainer.train()
    return seconds, splits


def _child(side: str, root: Path, warmup: int, steps: int, threads: int) -> dict:
    import torch
    import transformers

    torch.set_num_threads(threads)
    if side == "trl":
        seconds, splits = _trl(root, warmup + steps)
    else:
        seconds, splits = _ours(root, warmup + steps, timed_stages=side == "ours")
    for (wall, _), split in zip(seconds, splits):
        split["other"] = wall - sum(split.values())
    timed = splits[warmup:]
    return {"step": statistics.median(wall for wall, _ in seconds[warmup:]), "peak_mb": peak_mb(),
            "cpu": statistics.median(cpu for _, cpu in seconds[warmup:]),
            "split": {stage: statistics.median(s[stage] for s in timed) for stage in (*STAGES, "other")},
            "transformers": transformers.__version__}


def _run(python: str, side: str, root: Path, args, package_root: Path = REPO) -> dict:
    """One side's measurement in a fresh process, with `package_root`'s dataflex_rl."""
    command = [python, __file__, "--child", side, "--root", str(root), "--warmup", str(args.warmup),
               "--steps", str(args.steps), "--threads", str(args.threads)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(package_root)))
    if result.returncode:
        raise RuntimeError(f"{side} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trl-python", help="the python of an environment with trl installed (required)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (a fresh process per side)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per process")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per process before them")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on both sides (a job's default: 1)")
    parser.add_argument("--smoke", action="store_true", help="1 round of 1 warm-up and 1 timed step")
    parser.add_argument("--against", metavar="REV", help="also time the embedded step as of git revision REV")
    parser.add_argument("--child", choices=("ours", "revision", "trl"), help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.root, args.warmup, args.steps, args.threads)))
        return
    if not args.trl_python:
        parser.error("--trl-python is required: the python of an environment with trl installed (see the docstring)")
    if args.smoke:
        args.rounds, args.steps, args.warmup = 1, 1, 1
    pythons = {"ours": sys.executable, "revision": sys.executable, "trl": args.trl_python}
    sides = ("ours", "trl", "revision") if args.against else ("ours", "trl")
    results: dict[str, list[dict]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        _build(Path(tmp))
        roots = {"revision": extract_package(args.against, Path(tmp) / "revision")} if args.against else {}
        for round_ in range(args.rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                result = _run(pythons[side], side, Path(tmp), args, roots.get(side, REPO))
                results[side].append(result)
                print(f"round {round_ + 1} {side}: {result['step'] * 1000:.0f} ms/step ({result['cpu'] * 1000:.0f} "
                      f"ms CPU), peak {result['peak_mb']:.0f} MB", flush=True)
    s = _study().training
    print(f"\n{s.prompts_per_step} prompts × K={s.rollouts}, ≤ {s.max_new_tokens} new tokens, {args.threads} "
          f"thread(s); medians of {args.rounds} alternating rounds of {args.steps} steps after {args.warmup} warm-up")
    median = {side: {key: statistics.median(r[key] for r in rs) for key in ("step", "cpu", "peak_mb")}
              for side, rs in results.items()}
    names = {"ours": "embedded", "trl": "TRL GRPOTrainer", "revision": f"embedded as of {args.against}"}
    for side in sides:
        m = median[side]
        print(f"{names[side]} (transformers {results[side][0]['transformers']}): {1 / m['step']:.2f} steps/s "
              f"({m['step'] * 1000:.0f} ms/step, {m['cpu'] * 1000:.0f} ms CPU), peak RSS {m['peak_mb']:.0f} MB")
    for side in sides[1:]:
        print(f"embedded/{names[side]}: steps/s × {median[side]['step'] / median['ours']['step']:.2f} (CPU per step "
              f"× {median[side]['cpu'] / median['ours']['cpu']:.2f}); peak RSS × "
              f"{median['ours']['peak_mb'] / median[side]['peak_mb']:.2f}")
    print("\n| stage (ms, median over steps, then rounds) | embedded | TRL |\n|---|---|---|")
    for stage in (*STAGES, "other"):
        cells = []
        for side in ("ours", "trl"):
            value = statistics.median(r["split"][stage] for r in results[side])
            cells.append("—" if side == "trl" and stage == "policy" else f"{value * 1000:.1f}")
        print(f"| {stage} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
