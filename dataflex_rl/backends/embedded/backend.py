"""The embedded CPU backend: a tiny Qwen2 built locally, trained by the embedded GRPO trainer, decoded by the
embedded sampler. Torch is imported only when a job runs, so the registry stays light for the dry run."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.recipe import GRPOSettings
from dataflex_rl.sections import filled


class EmbeddedBackend:
    name = "embedded"
    conda_env = "../envs/cpu.yaml"
    builds_base_model = True

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"backend": self.name, "shape": asdict(filled(ModelShape, entry.get("shape"))),
                "warmup": asdict(filled(WarmupSettings, entry.get("warmup")))}

    def config_errors(self, key: str, entry: Mapping[str, Any], workdir: Path, records_only: bool) -> list[str]:
        if "path" in entry:
            return [f"{key}.path: {entry['path']!r} — the embedded backend builds its model from `shape` and `warmup` "
                    f"and reads no path; remove it or set `backend: verl`"]
        return []

    def train_resource_errors(self, training: Mapping[str, Any], resources: Mapping[str, Any]) -> list[str]:
        return []

    def build_base_model(self, model: Mapping[str, Any], *, corpus, out_dir, template: str, threads: int) -> None:
        from dataflex_rl.backends.embedded.base_model import build_base_model

        build_base_model(corpus, out_dir, ModelShape(**model["shape"]), WarmupSettings(**model["warmup"]), template,
                         threads=threads)

    def train(self, model: Mapping[str, Any], *, base, corpus, method, seed: int, training: GRPOSettings,
              template: str, out_model, out_metrics, state_dir, threads: int) -> None:
        from dataflex_rl.backends.embedded.trainer import train_run

        train_run(base, corpus, method, seed, training, template, out_model, out_metrics, state_dir, threads=threads)

    def open_generator(self, model: Mapping[str, Any], *, model_dir, threads: int):
        from dataflex_rl.backends.embedded.generation import EmbeddedGenerator

        return EmbeddedGenerator.load(model_dir, threads=threads)
