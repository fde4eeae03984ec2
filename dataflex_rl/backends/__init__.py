"""Backend dispatch: the workflow scripts call these three entry points; the model's `backend` picks the code.

Only the embedded CPU backend exists in this version; the verl backend (GPU cluster) is planned and refused with a
clear message rather than run by a stand-in.
"""
from __future__ import annotations

from pathlib import Path

from dataflex_rl.config import MethodSpec
from dataflex_rl.recipe import GRPOSettings


def _require_embedded(model_config: dict, what: str) -> None:
    if model_config["backend"] != "embedded":
        raise NotImplementedError(
            f"{what}: the {model_config['backend']!r} backend is not available in this version of DataFlex-RL "
            "(only 'embedded' runs); the rules, resources and job matrix are ready for it"
        )


def build_base_model(model_config: dict, *, corpus, out_dir, template: str, threads: int = 1) -> None:
    _require_embedded(model_config, "base model")
    from dataflex_rl.backends.embedded.base_model import build_base_model as build
    from dataflex_rl.backends.embedded.model import ModelShape
    from dataflex_rl.backends.embedded.warmup import WarmupSettings

    build(corpus, out_dir, ModelShape(**model_config.get("shape", {})), WarmupSettings(**model_config.get("warmup", {})),
          template, threads=threads)


def train_run(model_config: dict, *, base, corpus, method: MethodSpec, seed: int, settings: GRPOSettings,
              template: str, out_weights, out_metrics, state_dir, threads: int = 1) -> None:
    _require_embedded(model_config, "training")
    from dataflex_rl.backends.embedded.trainer import train_run as train

    train(base, corpus, method, seed, settings, template, out_weights, out_metrics, Path(state_dir), threads=threads)


def score_run(model_config: dict, *, base, weights, items: list, outputs: list, template: str, evaluation: dict,
              threads: int = 1) -> None:
    """Score one model on each benchmark file in `items`, writing the matching file of `outputs`."""
    _require_embedded(model_config, "scoring")
    from dataflex_rl.evaluate.scoring import score_embedded

    score_embedded(base, weights, items, outputs, template, max_new_tokens=evaluation.get("max_new_tokens", 8),
                   batch_size=evaluation.get("batch_size", 128), threads=threads,
                   temperature=evaluation.get("temperature", 0.0), seed=evaluation.get("seed", 0))
