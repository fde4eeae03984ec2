"""The embedded GRPO trainer: K seeded rollouts per prompt, verifiable rewards, the shared data policies and one
optimiser step per batch (ppo_mini_batch_size == train_batch_size, so old log-probs equal the current ones).

Everything that makes the run resumable — model, optimiser, sampling generator, prompt stream, mixture state and the
metrics so far — is written atomically into one checkpoint file every `checkpoint_every` steps.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch
from tqdm import tqdm

from dataflex_rl import grpo
from dataflex_rl.config import MethodSpec
from dataflex_rl.recipe import GRPOSettings
from dataflex_rl.atomic import atomic_path, write_parquet
from dataflex_rl.backends.embedded.generation import decode, response_texts
from dataflex_rl.backends.embedded.model import load_model
from dataflex_rl.backends.embedded.sequences import encode_prompts, response_logprobs
from dataflex_rl.policies import GroupBatch, build_mixture, build_response_policy
from dataflex_rl.prompt_stream import PromptStream
from dataflex_rl.tasks.prompting import render_prompt
from dataflex_rl.verify.verifiers import reward


def _rewards(responses: list[str], items: list[dict], rollouts: int) -> torch.Tensor:
    """[G, K] binary rewards: response r belongs to prompt r // K."""
    values = [reward(response, items[index // rollouts]) for index, response in enumerate(responses)]
    return torch.tensor(values, dtype=torch.float32).view(-1, rollouts)


class EmbeddedGRPOTrainer:
    def __init__(self, base_dir: str | Path, corpus: pd.DataFrame, method: MethodSpec, seed: int,
                 settings: GRPOSettings, template: str):
        self.settings, self.method, self.seed, self.template = settings, method, seed, template
        self.model, self.tokenizer = load_model(base_dir)
        self.reference = copy.deepcopy(self.model).requires_grad_(False)
        self.items = corpus.to_dict("records")
        self.prompt_tokens = encode_prompts(tokenizer=self.tokenizer,
                                            prompts=[render_prompt(i["prompt"], template) for i in self.items])
        self.stream = PromptStream([i["domain"] for i in self.items], seed)
        if method.family == "mixture":
            self.response_policy = build_response_policy("baseline", {})
            self.mixture = build_mixture(method.policy, self.stream.domains, method.params)
        else:
            self.response_policy = build_response_policy(method.policy, method.params)
            self.mixture = None
        torch.manual_seed(seed)
        self.optimiser = torch.optim.AdamW(self.model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
        self.generator = torch.Generator().manual_seed(seed)
        self.step = 0
        self.metrics: list[dict] = []

    # --- checkpoints -------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "step": self.step,
            "model": self.model.state_dict(),
            "optimiser": self.optimiser.state_dict(),
            "generator": self.generator.get_state(),
            "stream": self.stream.state_dict(),
            "mixture": self.mixture.state_dict() if self.mixture else None,
            "metrics": self.metrics,
            "settings": asdict(self.settings),
            "method": asdict(self.method),
            "seed": self.seed,
        }

    @staticmethod
    def _identity(method: dict, seed: int, settings: dict) -> tuple:
        """What a checkpoint must match to be resumed; `steps` is left out so that a finished run can be extended."""
        return method, seed, {k: v for k, v in settings.items() if k != "steps"}

    def save_checkpoint(self, path: Path) -> None:
        with atomic_path(path) as tmp:
            torch.save(self.state_dict(), tmp)

    def load_checkpoint(self, path: Path) -> None:
        state = torch.load(path, weights_only=False)
        if self._identity(state["method"], state["seed"], state["settings"]) != self._identity(
                asdict(self.method), self.seed, asdict(self.settings)):
            raise ValueError(f"checkpoint {path} belongs to another configuration "
                             f"({state['method']['name']}, seed {state['seed']}); delete it to start over")
        self.model.load_state_dict(state["model"])
        self.optimiser.load_state_dict(state["optimiser"])
        self.generator.set_state(state["generator"])
        self.stream.load_state_dict(state["stream"])
        if self.mixture:
            self.mixture.load_state_dict(state["mixture"])
        self.metrics = list(state["metrics"])
        self.step = int(state["step"])

    # --- one GRPO step -----------------------------------------------------------------------------------------
    def train_step(self) -> dict:
        s = self.settings
        started = time.perf_counter()
        probabilities = self.mixture.probabilities() if self.mixture else None
        rows = self.stream.draw(s.prompts_per_step, probabilities)
        items = [self.items[r] for r in rows]
        self.model.eval()
        rollout = decode(self.model, [self.prompt_tokens[r] for r in rows], max_new_tokens=s.max_new_tokens,
                         eos_id=self.tokenizer.eos_token_id, pad_id=self.tokenizer.pad_token_id, repeats=s.rollouts,
                         generator=self.generator, temperature=s.temperature)
        rewards = _rewards(response_texts(self.tokenizer, rollout), items, s.rollouts)
        groups, rollouts = rewards.shape
        shape = (groups, rollouts, -1)
        token_mask = rollout.response_mask.float().view(shape)

        self.model.train()
        tokens = (rollout.prompt_ids, rollout.prompt_mask, rollout.response_ids, rollout.response_mask)
        logp = response_logprobs(self.model, *tokens, repeats=s.rollouts).view(shape)
        with torch.no_grad():
            ref_logp = response_logprobs(self.reference, *tokens, repeats=s.rollouts).view(shape)
        old_logp = logp.detach()
        advantages = grpo.group_advantages(rewards)[..., None] * token_mask
        batch = GroupBatch(rewards=rewards, lengths=token_mask.sum(-1), token_mask=token_mask, advantages=advantages,
                           old_logprobs=old_logp, domains=tuple(i["domain"] for i in items),
                           prompt_ids=tuple(i["id"] for i in items))
        weights = self.response_policy.weigh(batch)
        used_advantages = weights.advantages if weights.advantages is not None else advantages
        loss, stats = grpo.grpo_loss(logp, old_logp, ref_logp, used_advantages, token_mask, weights.pg, weights.kl,
                                     kl_coef=s.kl_coef, clip_low=s.clip_low, clip_high=s.clip_high, kl_kind=s.kl_kind)
        self.optimiser.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), s.grad_clip)
        if not torch.isfinite(grad_norm):
            raise FloatingPointError(f"step {self.step}: non-finite gradient norm (mean reward {float(rewards.mean()):.3f})")
        self.optimiser.step()
        if self.mixture:
            self.mixture.observe(batch)

        degenerate = (rewards.max(dim=1).values == rewards.min(dim=1).values).float().mean()
        record = {
            "step": self.step,
            "mean_reward": float(rewards.mean()),
            "degenerate_group_fraction": float(degenerate),
            "kept_fraction": weights.kept_fraction,
            "all_dropped": bool(weights.info.get("all_dropped", False)),
            "loss": float(loss.detach()),
            "pg_loss": stats["pg_loss"],
            "kl": stats["kl"],
            "clip_fraction": stats["clip_fraction"],
            "grad_norm": float(grad_norm),
            "mean_response_length": float(token_mask.sum(-1).mean()),
            "seconds": time.perf_counter() - started,
        }
        for domain, p in (probabilities or self.stream.corpus_shares()).items():
            record[f"p:{domain}"] = p
        self.step += 1
        return record

    def train(self, state_dir: Path, progress: bool = True) -> pd.DataFrame:
        """Run (or resume) to `settings.steps`; returns the per-step metrics."""
        checkpoint = Path(state_dir) / "checkpoint.pt"
        if checkpoint.exists():
            self.load_checkpoint(checkpoint)
        bar = tqdm(total=self.settings.steps, initial=self.step, desc=f"GRPO {self.method.name} seed {self.seed}",
                   disable=not progress, mininterval=5)
        while self.step < self.settings.steps:
            self.metrics.append(self.train_step())
            bar.update(1)
            bar.set_postfix(reward=f"{self.metrics[-1]['mean_reward']:.3f}", refresh=False)
            if self.step % self.settings.checkpoint_every == 0 or self.step == self.settings.steps:
                self.save_checkpoint(checkpoint)
        bar.close()
        return pd.DataFrame(self.metrics)


def train_run(base_dir, corpus_path, method: MethodSpec, seed: int, settings: GRPOSettings, template: str,
              out_weights, out_metrics, state_dir, threads: int = 1, progress: bool = True) -> None:
    """Train one (model, method, seed) run and write its final weights and per-step metrics atomically."""
    torch.set_num_threads(threads)
    corpus = pd.read_parquet(corpus_path)
    trainer = EmbeddedGRPOTrainer(base_dir, corpus, method, seed, settings, template)
    metrics = trainer.train(Path(state_dir), progress=progress)
    metrics.insert(0, "method", method.name)
    metrics.insert(1, "seed", seed)
    with atomic_path(out_weights) as tmp:
        torch.save(trainer.model.state_dict(), tmp)
    write_parquet(out_metrics, metrics)
