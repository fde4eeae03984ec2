"""The embedded GRPO trainer: K seeded rollouts per prompt, verifiable rewards, the shared data policies and one
optimiser step per batch (ppo_mini_batch_size == train_batch_size, so old log-probs equal the current ones).

Everything that makes the run resumable — model, optimiser, the sampling generator and torch's global RNG, prompt
stream (with its domain RNG), mixture state, a prompt selection's round and the metrics so far — is written atomically into one checkpoint file
every `checkpoint_every` steps, so a run killed at any point and rerun ends bit-identical to an uninterrupted one
(tests/test_fault_injection.py kills it for real at each point of `dataflex_rl.training.faults`). No code path of a step
draws from Python's or numpy's global RNG: the prompt stream owns its `random.Random`s and the matched-random control of
a selection derives its generator from the seed and the batch's prompt ids.

The checkpoint also records torch's intra-op thread count: CPU kernels split their sums by it, so one run trained with
1 and with 2 threads drifts apart within tens to hundreds of steps (torch's deterministic mode does not change that),
and a resume under another count is refused rather than mixing the two.

A batch whose rewards, advantages, loss or gradient norm is not finite stops the run with a FloatingPointError before
its update is applied, after checkpointing the state before that step.
"""
from __future__ import annotations

import copy
import glob
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Sequence

import pandas as pd
import torch
from tqdm import tqdm

from dataflex_rl.training import grpo
from dataflex_rl.training.faults import FaultPlan
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.artefacts.atomic import atomic_directory, atomic_path, remove_partial_writes, write_parquet
from dataflex_rl.artefacts.train_state import load_train_state
from dataflex_rl.backends.base import ProbeOpener
from dataflex_rl.backends.embedded.generation import decode_from, left_pad, response_texts
from dataflex_rl.backends.embedded.model import load_model
from dataflex_rl.backends.embedded.rewards import rollout_rewards
from dataflex_rl.backends.embedded.sequences import (continuation_logprobs, encode_prompts, prefill,
                                                     response_logprobs)
from dataflex_rl.policies.driver import PolicyDriver
from dataflex_rl.prompt_selection.selector import RowLabels
from dataflex_rl.regimes.low_utility import is_easy
from dataflex_rl.regimes.noisy_rewards import noisy_reward_p
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.corpus.prompting import render_prompt
from dataflex_rl.corpus.token_caps import TokenCaps, check_token_cap
from dataflex_rl.corpus.training_fit import TRAINING_PROMPTS, check_prompts_per_step


def _batch_health(rewards: torch.Tensor, token_mask: torch.Tensor) -> dict[str, str]:
    """The batch statistics a numerical error reports; the later ones are filled in as the step computes them."""
    spread = rewards.std(dim=1, correction=0)
    return {
        "mean reward": f"{float(rewards.mean()):.4g}",
        "group reward std min/mean/max": "/".join(f"{float(v):.3g}" for v in (spread.min(), spread.mean(),
                                                                               spread.max())),
        "mean response length": f"{float(token_mask.sum(-1).mean()):.4g}",
        "kept fraction": "not reached",
        "loss": "not reached",
        "grad norm": "not reached",
    }


class EmbeddedGRPOTrainer:
    def __init__(self, base_dir: str | Path, corpus: pd.DataFrame, method: MethodSpec, seed: int,
                 settings: GRPOSettings, template: str, target_domain: str | None = None,
                 open_probe: ProbeOpener | None = None, validation_draws: Sequence[tuple[int, int]] = ()):
        """`target_domain`: the unbalanced regime's evaluation domain, where a prompt selection draws its validation
        prompts from (None: any domain). `open_probe`: the backend's probe (Backend.open_probe), which a prompt
        selection's rounds measure on this trainer. `validation_draws`: the study's validation draws on this corpus,
        held out of this run's prompts whatever its method (TrainJob.validation_draws)."""
        self.settings, self.method, self.seed, self.template = settings, method, seed, template
        self.model, self.tokenizer = load_model(base_dir)
        self.reference = copy.deepcopy(self.model).requires_grad_(False)
        # a prompt selection's own validation prompts (a file, or a benchmark's items): they follow the corpus's
        # rows, and are never trained on
        validation = method.validation_rows()
        self.items = corpus.to_dict("records") + validation
        self.noise_p = [noisy_reward_p(item) for item in self.items[:len(corpus)]] + [None] * len(validation)
        self.prompt_tokens = encode_prompts(tokenizer=self.tokenizer,
                                            prompts=[render_prompt(i["prompt"], template, self.tokenizer)
                                                     for i in self.items])
        domains = [i["domain"] for i in self.items]
        labels = RowLabels(domains, [p is not None for p in self.noise_p], [is_easy(i) for i in self.items],
                           target_domain)
        self.driver = PolicyDriver(method, domains[:len(corpus)], seed, labels, validation_draws)
        torch.manual_seed(seed)
        self.optimiser = torch.optim.AdamW(self.model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
        self.probe = None
        if self.driver.needs_probe:
            if open_probe is None:
                raise ValueError(f"method {method.name!r} selects prompts by a probe of the training model, and the "
                                 f"trainer was given none (open_probe)")
            self.probe = open_probe(self, self.driver.score_temperature(settings.temperature))
        self.generator = torch.Generator().manual_seed(seed)
        self.threads = torch.get_num_threads()  # what the run's steps are trained with; a resume keeps the recorded one
        self.step = 0
        self.metrics: list[dict] = []
        self.fault = FaultPlan.from_environment()

    # --- checkpoints -------------------------------------------------------------------------------------------
    def _draw_state(self) -> dict:
        """What a step consumes besides the model and the optimiser: the RNGs, the prompt stream and the mixture."""
        return {"generator": self.generator.get_state(), "torch_rng": torch.get_rng_state(),
                **self.driver.state_dict()}

    def _load_draw_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        self.driver.load_state_dict(state)

    def state_dict(self) -> dict:
        return {
            "step": self.step,
            "threads": self.threads,
            "model": self.model.state_dict(),
            "optimiser": self.optimiser.state_dict(),
            **self._draw_state(),
            "metrics": self.metrics,
        }

    def save_checkpoint(self, path: Path) -> None:
        self.save_atomically(self.state_dict(), path, fault_point="checkpoint_write")

    def save_atomically(self, obj, path: Path, fault_point: str) -> None:
        """torch.save through `atomic_path`; `fault_point` names the write for `dataflex_rl.training.faults`."""
        with atomic_path(path) as tmp, open(tmp, "wb") as handle:
            torch.save(obj, self.fault.writer(handle, fault_point, self.step))

    def _restore(self, state: dict, path: Path) -> None:
        """Resume from the checkpoint loaded from `path`; the caller keys the state folder by the run's settings and
        inputs (dataflex_rl.study.jobs.training_state), so a checkpoint found there belongs to this configuration."""
        self.threads = self._resumed_threads(state, path)
        self.model.load_state_dict(state["model"])
        self.optimiser.load_state_dict(state["optimiser"])
        self._load_draw_state(state)
        self.metrics = list(state["metrics"])
        self.step = int(state["step"])

    def _resumed_threads(self, state: dict, path: Path) -> int:
        """The thread count of a run resumed from `path`: the one its checkpoint recorded. Training further steps
        with another count is refused (those steps would give other weights than either count alone); rebuilding a
        finished run's outputs trains nothing, so any count may do it. A checkpoint written before thread counts
        were recorded continues with this process's count."""
        recorded, step = state.get("threads"), int(state["step"])
        if recorded is None:
            print(f"{path} records no thread count (written before checkpoints recorded one); continuing with "
                  f"{self.threads}", file=sys.stderr)
            return self.threads
        if recorded != self.threads and step < self.settings.steps:
            raise RuntimeError(
                f"training state {path.parent} was trained with {recorded} thread(s) up to step {step}, and this "
                f"job has {self.threads}: torch's CPU sums depend on the thread count, so the remaining steps would "
                f"give weights that match neither a run with {recorded} nor one with {self.threads}. Rerun with the "
                f"job given {recorded} thread(s) again (threads_per_job: {recorded} and --cores {recorded} or more: "
                f"Snakemake scales a job's threads down to --cores), or delete {path.parent} to train the run afresh "
                f"with {self.threads}")
        return int(recorded)

    # --- one GRPO step -----------------------------------------------------------------------------------------
    def train_step(self) -> dict:
        s = self.settings
        started = time.perf_counter()
        rows = self.driver.draw(s.prompts_per_step, self.step, self.probe)
        items = [self.items[r] for r in rows]
        self.model.eval()
        # The policy's prompts run once, with autograd: the rollouts are sampled from this prefix and the loss's
        # forward continues from it.
        prefix = prefill(self.model, *left_pad([self.prompt_tokens[r] for r in rows], self.tokenizer.pad_token_id))
        rollout = decode_from(self.model, prefix, max_new_tokens=s.max_new_tokens, eos_id=self.tokenizer.eos_token_id,
                              pad_id=self.tokenizer.pad_token_id, repeats=s.rollouts, generator=self.generator,
                              temperature=s.temperature)
        rewards = rollout_rewards(response_texts(self.tokenizer, rollout), items, [self.noise_p[r] for r in rows],
                           s.rollouts, self.seed, self.step)
        groups, rollouts = rewards.shape
        shape = (groups, rollouts, -1)
        token_mask = rollout.response_mask.float().view(shape)
        health = _batch_health(rewards, token_mask)
        self.fault.reached("after_rollouts", self.step)

        try:
            if not torch.isfinite(rewards).all():
                raise FloatingPointError(f"{int((~torch.isfinite(rewards)).sum())} rewards are not finite")
            self.model.train()
            responses = (rollout.response_ids, rollout.response_mask)
            logp = continuation_logprobs(self.model, prefix, *responses, repeats=s.rollouts).view(shape)
            with torch.no_grad():
                ref_logp = response_logprobs(self.reference, rollout.prompt_ids, rollout.prompt_mask, *responses,
                                             repeats=s.rollouts).view(shape)
            old_logp = logp.detach()
            advantages = grpo.group_advantages(rewards)[..., None] * token_mask
            weighed = self.driver.weigh(rewards, token_mask, advantages, old_logp, [i["domain"] for i in items],
                                        [i["id"] for i in items])
            health["kept fraction"] = f"{weighed.weights.kept_fraction:.4g}"
            loss, stats = grpo.grpo_loss(logp, old_logp, ref_logp, weighed.advantages, token_mask, weighed.pg,
                                         weighed.kl, kl_coef=s.kl_coef, clip_low=s.clip_low, clip_high=s.clip_high,
                                         kl_kind=s.kl_kind, loss_aggregation=s.loss_aggregation)
            health["loss"] = f"{float(loss.detach()):.4g}"
            self.optimiser.zero_grad()
            loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.grad_clip)
            health["grad norm"] = f"{float(grad_norm):.4g}"
            if not torch.isfinite(grad_norm):
                raise FloatingPointError("the gradient norm is not finite")
        except FloatingPointError as error:
            summary = ", ".join(f"{name} {value}" for name, value in health.items())
            raise FloatingPointError(f"step {self.step}: {error}. Batch: {summary}") from error
        self.optimiser.step()
        self.driver.observe(weighed.batch)

        record = {
            "step": self.step,
            **self.driver.metrics(weighed),
            "loss": float(loss.detach()),
            "pg_loss": stats["pg_loss"],
            "kl": stats["kl"],
            "clip_fraction": stats["clip_fraction"],
            "grad_norm": float(grad_norm),
            "mean_response_length": float(token_mask.sum(-1).mean()),
            "seconds": time.perf_counter() - started,
        }
        self.step += 1
        return record

    def _refused(self, error: FloatingPointError, before: dict, checkpoint: Path) -> None:
        """Checkpoint the last good state after a step refused a non-finite batch, and say so on the error.

        The refusal comes before the optimiser step, so the model and optimiser are untouched, and rewinding what the
        step drew restores the state before it exactly: a rerun with the cause fixed resumes from there, and a retry
        with the cause still present fails again at once instead of repeating the steps since the last checkpoint.
        """
        self._load_draw_state(before)
        self.save_checkpoint(checkpoint)
        error.add_note(f"The update was not applied; {checkpoint} holds the state before step {self.step}, and a "
                       "rerun resumes from it.")

    def train(self, state_dir: Path, progress: bool = True) -> pd.DataFrame:
        """Run (or resume) to `settings.steps`; returns the per-step metrics."""
        checkpoint = Path(state_dir) / "checkpoint.pt"
        remove_partial_writes(checkpoint.parent, glob.escape(checkpoint.name))
        start = self._resume_point(Path(state_dir), checkpoint)
        if start is not None:
            path, state = start
            self._restore(state, path)
            print(f"resuming from step {self.step} of {path}", file=sys.stderr)
        bar = tqdm(total=self.settings.steps, initial=self.step, desc=f"GRPO {self.method.name} seed {self.seed}",
                   disable=not progress, mininterval=5)
        while self.step < self.settings.steps:
            self.fault.reached("step_start", self.step)
            before = self._draw_state()
            try:
                record = self.train_step()
            except FloatingPointError as error:
                self._refused(error, before, checkpoint)
                raise
            self.metrics.append(record)
            self.fault.reached("after_optimiser_step", self.step)
            bar.update(1)
            bar.set_postfix(reward=f"{self.metrics[-1]['mean_reward']:.3f}", refresh=False)
            if self.step % self.settings.checkpoint_every == 0 or self.step == self.settings.steps:
                self.save_checkpoint(checkpoint)
                self.fault.reached("after_checkpoint", self.step)
        bar.close()
        self._keep_budget(Path(state_dir), checkpoint)
        return pd.DataFrame(self.metrics)

    # --- step budgets: every budget of a training line shares its state folder -----------------------------------
    def _resume_point(self, state_dir: Path, checkpoint: Path) -> tuple[Path, dict] | None:
        """The checkpoint to resume from, loaded: the latest one, unless a longer budget of this line has already
        taken it past `settings.steps` (a shorter run rebuilt after a longer one); then the kept end of the longest
        budget within reach (`_keep_budget`), or none: the run starts afresh. An unreadable file is set aside
        (`_readable`) and the next one in that order is tried."""
        budgets = {int(path.stem.removeprefix("budget")): path for path in state_dir.glob("budget*.pt")}
        within = [budgets[steps] for steps in sorted(budgets, reverse=True) if steps <= self.settings.steps]
        unreadable = []
        for path in ([checkpoint] if checkpoint.exists() else []) + within:
            state = _readable(path)
            if state is None:
                unreadable.append(path.name)
            elif int(state["step"]) <= self.settings.steps:
                return path, state
        if unreadable:
            print(f"no readable checkpoint within {self.settings.steps} steps in {state_dir} "
                  f"({', '.join(unreadable)} set aside): starting afresh", file=sys.stderr)
        return None

    def _keep_budget(self, state_dir: Path, checkpoint: Path) -> None:
        """Keep the state at the end of this budget (a hard link: no copy until the latest checkpoint moves on), so
        that a rerun of this budget after a longer one has continued the line needs no retraining."""
        kept = state_dir / f"budget{self.settings.steps}.pt"
        if checkpoint.exists() and not kept.exists():
            os.link(checkpoint, kept)


def _readable(path: Path) -> dict | None:
    """A checkpoint's state, or None when torch cannot read it (a truncated or overwritten file): then the file is
    renamed `<name>.unreadable`, saying so, so that it is neither tried again nor kept as a budget's end. A file that
    names objects beyond tensors and numbers is refused (UntrustedStateError), and left where it is."""
    try:
        return load_train_state(path, path.parent)
    except (RuntimeError, EOFError, ValueError, pickle.UnpicklingError) as error:
        aside = path.with_name(f"{path.name}.unreadable")
        os.replace(path, aside)
        print(f"{path}: unreadable checkpoint ({str(error).strip()}); set aside as {aside.name}", file=sys.stderr)
        return None


def train_run(base_dir, corpus_path, method: MethodSpec, seed: int, settings: GRPOSettings, template: str,
              out_model, out_metrics, state_dir, threads: int = 1, progress: bool = True,
              token_caps: TokenCaps | None = None, target_domain: str | None = None,
              open_probe: ProbeOpener | None = None, validation_draws: Sequence[tuple[int, int]] = ()) -> int:
    """Train one (model, method, seed) run; write its final model directory (Hugging Face layout, loadable by
    transformers or vLLM like the base) and its per-step metrics, each atomically; return the thread count its steps
    were trained with. Before the first step, the corpus the run trains on must hold one step's prompts, each within
    `token_caps.prompt` tokens (dataflex_rl.corpus.training_fit)."""
    torch.set_num_threads(threads)
    corpus = pd.read_parquet(corpus_path)
    check_prompts_per_step(len(corpus), settings.prompts_per_step, str(corpus_path))
    trainer = EmbeddedGRPOTrainer(base_dir, corpus, method, seed, settings, template, target_domain, open_probe,
                                  validation_draws)
    if token_caps is not None:
        # the corpus's prompts and a validation file's after them (the probe renders and decodes both alike)
        check_token_cap(TRAINING_PROMPTS, [item["id"] for item in trainer.items],
                        [len(p) for p in trainer.prompt_tokens], token_caps.prompt, str(corpus_path))
    metrics = trainer.train(Path(state_dir), progress=progress)
    metrics.insert(0, "method", method.name)
    metrics.insert(1, "seed", seed)
    remove_partial_writes(Path(out_metrics).parent, glob.escape(Path(out_metrics).name))
    with atomic_directory(out_model) as tmp:
        trainer.model.save_pretrained(tmp)
        trainer.fault.reached("final_weights", trainer.step)  # killed between the weights and the tokenizer
        trainer.tokenizer.save_pretrained(tmp)
    trainer.fault.reached("after_final_weights", trainer.step)
    write_parquet(out_metrics, metrics)
    return trainer.threads
