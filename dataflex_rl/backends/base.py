"""The backend seam: what a backend must provide (the registry that finds one by name: dataflex_rl.backends.registry).

A backend builds (or loads) a base model, trains one run with the shared data policies (dataflex_rl.policy_driver)
and generates answers for scoring; everything around that — input verification, provenance, resumable-state keys,
verdicts, records — is backend-neutral (dataflex_rl.jobs, dataflex_rl.evaluate). Importing this module does not
import torch: the rules read `conda_env` and `builds_base_model`, and the dry run `config_errors`, at parse time.
"""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple, Protocol, Sequence

from dataflex_rl.recipe import GRPOSettings


class Answer(NamedTuple):
    """One generated response: its text, its length in tokens, and what the generating engine reports beside it
    (vLLM: finish_reason, its version, the tensor parallelism), which become extra columns of the item's score record
    (none for the embedded generator, whose records keep their columns)."""

    text: str
    length: int
    engine: Mapping[str, Any] = MappingProxyType({})


class Generator(Protocol):
    """A loaded model that answers prompts. `tokenizer` (a Hugging Face tokenizer) renders each prompt through its
    chat template, so the text a model is scored on is the text it was trained on."""

    tokenizer: Any

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int, batch_size: int, temperature: float,
                 seed: int) -> list[Answer]:
        """An Answer per prompt, in order: greedy at temperature 0, else sampled with draws seeded by `seed` (the
        same prompts, batch size and seed give the same responses)."""


class Backend(Protocol):
    name: str
    conda_env: str  # the rule's conda environment file, relative to rules/
    builds_base_model: bool  # the embedded backend builds its base (rule base_model); verl loads `path`
    merges_checkpoint: bool  # a trained run is merged into a Hugging Face directory before scoring (rule merge)

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """A config `models.<m>` entry with every default filled in: what the model's jobs are given."""

    def result_settings(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Of a model's `settings` (model_settings), those its base's artefacts depend on, and those a trained run's
        result depends on beyond them; a setting in neither (a memory share) changes no artefact."""

    def config_errors(self, key: str, entry: Mapping[str, Any], workdir: Path, records_only: bool,
                      methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Why a `models.<m>` entry (at config key `key`), or one of the study's `methods` on it, cannot run on this
        backend, each naming the key and fix."""

    def model_notes(self, key: str, entry: Mapping[str, Any], workdir: Path) -> list[str]:
        """Lines for the dry-run summary on where a `models.<m>` entry's model comes from that are worth a look but
        not a refusal (verl: a hub name the jobs will download); [] for none."""

    def train_resource_errors(self, key: str, entry: Mapping[str, Any], training: GRPOSettings,
                              resources: Mapping[str, Any], prompt_cap: Mapping[str, Any] | None,
                              selection: Any = None) -> list[str]:
        """Why a train job of model `entry` (at config key `key`) with these `training` settings, on prompts of up to
        `prompt_cap` (dataflex_rl.tasks.training_fit; None where the backend caps its own), cannot run with its merged
        `resources` on this backend. `selection`: the study's largest prompt-selection round
        (prompt_selection.candidates.SelectionSize: candidates and rollouts per prompt), None without one."""

    def score_resource_errors(self, key: str, entry: Mapping[str, Any], batch_size: int, max_new_tokens: int,
                              resources: Mapping[str, Any]) -> list[str]:
        """Why a score job of model `entry`, decoding `batch_size` prompts at a time (evaluation.batch_size) up to
        `max_new_tokens`, cannot run with its merged `resources` on this backend."""

    def build_base_model(self, model: Mapping[str, Any], *, corpus, out_dir, template: str, threads: int,
                         prompt_cap: Mapping[str, Any] | None = None,
                         answer_cap: Mapping[str, Any] | None = None) -> None:
        """Build the base model from the corpus, refusing a prompt longer than `prompt_cap` or a gold answer longer
        than `answer_cap` (dataflex_rl.tasks.training_fit) once the tokenizer exists."""

    def train(self, model: Mapping[str, Any], *, base, corpus, method, seed: int, training: GRPOSettings,
              template: str, out_model, out_metrics, state_dir, threads: int,
              prompt_cap: Mapping[str, Any] | None = None, target_domain: str | None = None,
              gpus: int = 0) -> dict[str, Any]:
        """Train one run from `base` (None: the backend loads `path`); write the final model directory (Hugging Face
        layout) and the per-step metrics; return what the run ran with that its settings do not fix, for the `runtime`
        of its provenance record ({} for nothing; verl: the attention kernel). Before the first step the corpus must fit the run
        (dataflex_rl.tasks.training_fit: one step's prompts, each within `prompt_cap`). `target_domain`: where a prompt
        selection draws its validation prompts (the unbalanced regime's evaluation domain; None: any). `gpus`: the train
        job's `gpu` resource (0 where it has none)."""

    def open_generator(self, model: Mapping[str, Any], *, model_dir, threads: int, gpus: int = 0) -> Generator:
        """Load a model directory (a base or a trained run's) for scoring; None: the untrained `path` itself. `gpus`:
        the score job's `gpu` resource (0 where it has none)."""

    def job_commands(self, training: GRPOSettings, evaluation: Mapping[str, Any],
                     resources: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """What the backend's own jobs run, for the dry-run summary: lines naming the job and its command, with the
        study's `training` settings, its scoring settings (`evaluation`: EvaluationSettings.scoring) and the merged
        resources per rule (`resources`), placeholders in <> for what varies per job."""

    def job_resources(self, rule: str) -> dict[str, Any]:
        """What a job of `rule` (train, merge, score) on this backend asks of its machine: Snakemake resources (gpu,
        cpus_per_task, mem_mb, runtime), given to the rule (rules/common.smk); {} where the defaults serve."""
