"""The backend seam: what a backend must provide (the registry that finds one by name: dataflex_rl.backends.registry).

A backend builds (or loads) a base model, trains one run with the shared data policies (dataflex_rl.policies.driver)
and generates answers for scoring; everything around that — input verification, provenance, resumable-state keys,
verdicts, records — is backend-neutral (dataflex_rl.study.jobs, dataflex_rl.evaluate). The seam has two parts: what the
dry run and the rules read while the DAG is built (`DryRunBackend`), and what a job runs (`RunBackend`), given the
job's typed spec (`BaseModelJob`, `TrainJob`) and its token caps (dataflex_rl.corpus.token_caps.TokenCaps). Importing
this module does not import torch; a backend imports it inside its run-time members.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Protocol, Sequence

from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.corpus.token_caps import TokenCap, TokenCaps

if TYPE_CHECKING:  # the probe's module imports torch; the others would close an import circle
    from dataflex_rl.backends.model_spec import ModelSpec
    from dataflex_rl.evaluate.settings import EvaluationSettings
    from dataflex_rl.prompt_selection.candidates import SelectionSize
    from dataflex_rl.prompt_selection.round import Probe


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
                 seed: int, samples: int = 1) -> list[Answer]:
        """`samples` Answers per prompt, sample-major (answer `j * len(prompts) + i` is prompt i's sample j): greedy
        at temperature 0, else sampled with draws seeded by `seed` (the same prompts, batch size, seed and samples
        give the same responses). The samples of one prompt are independent draws: never K requests that share one
        seed, which vLLM decodes as K copies of one stream."""


@dataclass(frozen=True)
class BaseModelJob:
    """A base build's arguments (Study.base_job): the model's settings, as its backend filled them in
    (DryRunBackend.model_settings, read by that backend alone), and the prompt template."""

    model: Mapping[str, Any]
    template: str


@dataclass(frozen=True)
class TrainJob:
    """A train job's arguments (Study.train_job), typed. `target_domain`: where a prompt selection draws its validation
    prompts (the unbalanced regime's evaluation domain; None: any). `validation_draws`: the study's validation draws
    on the run's corpus, (validation_size, validation_seed) each, whose rows the run holds out whatever its method
    (Study.validation_draws)."""

    model: Mapping[str, Any]
    template: str
    method: MethodSpec
    seed: int
    training: GRPOSettings
    target_domain: str | None = None
    validation_draws: tuple[tuple[int, int], ...] = ()


class BaseModelBuilder(Protocol):
    def __call__(self, job: BaseModelJob, *, corpus, out_dir, threads: int, token_caps: TokenCaps | None) -> None:
        """Build the base model from the corpus into `out_dir`, refusing a prompt or gold answer over `token_caps`
        (dataflex_rl.corpus.training_fit) once the tokenizer exists."""


class Merger(Protocol):
    def __call__(self, model_dir, out_dir) -> None:
        """Merge a trained run's model output (`model_dir`, as its train job wrote it) into a Hugging Face model
        directory `out_dir` that the backend's generator scores."""


class ProbeOpener(Protocol):
    def __call__(self, trainer: Any, temperature: float) -> Probe:
        """The probe a prompt selection's rounds measure (dataflex_rl.prompt_selection.round.Probe: sampled rollouts of
        corpus rows, per-group gradients of the probe loss) on the live state of the backend's own `trainer`,
        sampling at `temperature`."""


class DryRunBackend(Protocol):
    """What the study, the rules and the dry run read while the DAG is built: torch-free."""

    name: str
    conda_env: str  # the rule's conda environment file, relative to rules/

    def model_settings(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        """A config `models.<m>` entry with every default filled in: what the model's jobs are given."""

    def result_settings(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Of a model's `settings` (model_settings), those its base's artefacts depend on, and those a trained run's
        result depends on beyond them; a setting in neither (a memory share) changes no artefact."""

    def config_errors(self, key: str, model: ModelSpec, workdir: Path, records_only: bool,
                      methods: Mapping[str, MethodSpec]) -> list[str]:
        """Why a model (at config key `key`), or one of the `methods` the study trains on it, cannot run on this
        backend, each naming the key and fix."""

    def model_notes(self, key: str, model: ModelSpec, workdir: Path) -> list[str]:
        """Lines for the dry-run summary on where a model (at config key `key`) comes from that are worth a look but
        not a refusal (verl: a hub name the jobs will download); [] for none."""

    def train_resource_errors(self, key: str, model: ModelSpec, training: GRPOSettings,
                              resources: Mapping[str, Any], prompt_cap: TokenCap | None,
                              selection: SelectionSize | None = None) -> list[str]:
        """Why a train job of `model` (at config key `key`) with these `training` settings, on prompts of up to
        `prompt_cap` (dataflex_rl.corpus.training_fit; None where the backend caps its own), cannot run with its merged
        `resources` on this backend. `selection`: the study's largest prompt-selection round
        (prompt_selection.candidates.SelectionSize: candidates and rollouts per prompt), None without one."""

    def score_resource_errors(self, key: str, model: ModelSpec, batch_size: int, max_new_tokens: int,
                              resources: Mapping[str, Any]) -> list[str]:
        """Why a score job of `model`, decoding `batch_size` prompts at a time (evaluation.batch_size) up to
        `max_new_tokens`, cannot run with its merged `resources` on this backend."""

    def job_commands(self, training: GRPOSettings, evaluation: EvaluationSettings,
                     resources: Mapping[str, Mapping[str, Any]], prompt_selection: bool = False) -> list[str]:
        """What the backend's own jobs run, for the dry-run summary: lines naming the job and its command, with the
        study's `training` and `evaluation` settings (and, where the study trains a prompt selection, what its
        selection rounds run) and the merged
        resources per rule (`resources`), placeholders in <> for what varies per job."""

    def job_resources(self, rule: str) -> dict[str, Any]:
        """What a job of `rule` (train, merge, score) on this backend asks of its machine: Snakemake resources (gpu,
        cpus_per_task, mem_mb, runtime), given to the rule (rules/common.smk); {} where the defaults serve."""


class RunBackend(Protocol):
    """What the jobs run (dataflex_rl.study.jobs). A member that is None is a step the backend has no part in, and the
    rules plan no job for it: `build_base_model` None, the backend loads `models.<m>.path` (no rule base_model); `merge`
    None, a trained run's model directory is scored as written (no rule merge); `open_probe` None, the backend runs no
    prompt selection (refused at dry run)."""

    build_base_model: BaseModelBuilder | None
    merge: Merger | None
    open_probe: ProbeOpener | None
    # Prompts per saved part of a solve-rate job (dataflex_rl.study.jobs.measure_base_solve_rates), which a retry
    # reuses; None: the whole corpus in one, for a generator whose samples of all prompts come from one stream (the
    # parts would then change the rates).
    solve_rate_part: int | None
    # Prompts per solve-rate job (dataflex_rl.study.solve_rate_time: the corpus in chunks of this many, one job each,
    # which a cluster runs side by side), a multiple of `solve_rate_part`; None: the whole corpus in one job.
    solve_rate_job_prompts: int | None
    # Generated tokens a second of the solve-rate job's engine on a GPU type (the job's `gpu_model`, None where it asks
    # for none), and how the summary names that figure, which the dry run sizes that job's runtime by
    # (dataflex_rl.study.solve_rate_time); None: the rule's default runtime.
    solve_rate_throughput: Callable[[str | None], tuple[float, str]] | None

    def train(self, job: TrainJob, *, base, corpus, out_model, out_metrics, state_dir, threads: int,
              token_caps: TokenCaps | None, gpus: int) -> dict[str, Any]:
        """Train one run from `base` (None: the backend loads `path`); write the final model directory and the per-step
        metrics; return what the run ran with that its settings do not fix, for the `runtime` of its provenance
        record ({} for nothing; verl: the attention kernel). Before the first step the corpus must fit the run
        (dataflex_rl.corpus.training_fit: one step's prompts, each within `token_caps.prompt`). `gpus`: the train job's
        `gpu` resource (0 where it has none)."""

    def open_generator(self, model: Mapping[str, Any], *, model_dir, threads: int, gpus: int) -> Generator:
        """Load a model directory (a base, a trained run's, or a merged one) of a model of settings `model` for
        scoring; None: the untrained `path` itself. `gpus`: the job's `gpu` resource (0 where it has none)."""


class Backend(DryRunBackend, RunBackend, Protocol):
    """Both parts: what the registry holds."""
