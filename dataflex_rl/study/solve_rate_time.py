"""The runtime the dry run asks for a solve-rate job (rule solve_rates: the untrained base's K samples per
clean-corpus prompt, which the low_utility regime reads), where the model's backend states a decoding throughput
(`solve_rate_tokens_per_second`: verl's vLLM engine); a backend without one (embedded) keeps the rule's defaults.

The job's work is bounded by what the dry run knows: at most `rows` prompts (the corpus's upper bound before
decontamination and de-duplication: dataflex_rl.study.corpus_bound) × K samples (the model's training.rollouts) ×
up to max_new_tokens tokens each (the model's own, else training.max_new_tokens: every sample decoded to the cap,
the worst case). Its runtime is that many tokens at the backend's throughput, plus the engine's start, in whole
minutes: sized so that the job does not time out under the stated throughput, which no GPU run has calibrated yet. A
model's own `resources.solve_rates.runtime` (or a profile's set-resources, or --set-resources) replaces it; the job
keeps each finished part (the backend's `solve_rate_part` prompts), so an attempt cut short by its time limit loses
only the part it was measuring, and a retry resumes. The dry run holds it to `cluster.partitions`' max_runtime as every
other job's runtime (config_checks.resource_errors), or without them to its partition's time limit where sinfo answers
(slurm_nodes.node_fit_errors), and the summary prints the arithmetic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from dataflex_rl.backends.registry import get_backend
from dataflex_rl.study.corpus_bound import corpus_rows_bound
from dataflex_rl.study.resolved import Study

START_MINUTES = 15  # starting the engine: loading the weights, compiling, capturing CUDA graphs (an allowance)
SIZED_RUNTIME = ("solve_rates", "runtime")  # the rule and resource sized here


@dataclass(frozen=True)
class SolveRateTime:
    """A solve-rate job's work and the runtime it is given."""

    model: str
    rows: int
    made_of: str  # how the corpus's row bound is made up (corpus_rows_bound)
    samples: int
    max_new_tokens: int
    length_key: str  # the setting max_new_tokens comes from: the model's own, or the study's
    tokens_per_second: float

    @property
    def tokens(self) -> int:
        return self.rows * self.samples * self.max_new_tokens

    @property
    def minutes(self) -> int:
        return START_MINUTES + math.ceil(self.tokens / self.tokens_per_second / 60)

    def arithmetic(self) -> str:
        return (f"{self.rows:,} prompts at most ({self.made_of}) × K = {self.samples} samples (training.rollouts) × "
                f"up to {self.max_new_tokens:,} tokens ({self.length_key}) = {self.tokens:,} tokens at an assumed "
                f"{self.tokens_per_second:,.0f} tokens/s of one vLLM engine (batch-invariant; calibrated on no GPU) "
                f"+ {START_MINUTES} min to start = {self.minutes:,} min")


_ROWS: dict[tuple[str, Path], tuple[int, str] | None] = {}


def _rows_bound(study: Study, workdir: Path) -> tuple[int, str] | None:
    """The corpus's row bound, counted once per process and corpus: every job parses the Snakefile, whose rule asks
    for it."""
    key = (repr(study.corpus), workdir)
    if key not in _ROWS:
        _ROWS[key] = corpus_rows_bound(study.corpus, workdir, math.inf)
    return _ROWS[key]


def solve_rate_time(study: Study, model: str, workdir: Path = Path(".")) -> SolveRateTime | None:
    """The sized solve-rate job of `model`, None where its backend states no throughput or a corpus file cannot be
    counted (its own check refuses it)."""
    spec = study.models[model]
    throughput = get_backend(spec.backend).solve_rate_tokens_per_second
    bound = _rows_bound(study, Path(workdir).resolve())
    if throughput is None or bound is None:
        return None
    training = study.model_training(model)
    return SolveRateTime(model, *bound, training.rollouts, training.max_new_tokens,
                         spec.setting_key("training", "max_new_tokens"), throughput)


def sized_runtime(study: Study, model: str, workdir: Path = Path(".")) -> int | None:
    """The runtime, in minutes, of `model`'s solve-rate job: its own `resources.solve_rates.runtime` where it sets one,
    else the sized one (solve_rate_time), else None (the backend's default)."""
    own = study.models[model].resources.get("solve_rates", {}).get("runtime")
    if own is not None:
        return None
    sized = solve_rate_time(study, model, workdir)
    return sized and sized.minutes


def solve_rate_lines(study: Study, workdir: Path = Path(".")) -> list[str]:
    """The dry-run summary's line per sized solve-rate job: its runtime and the arithmetic behind it."""
    lines = []
    for model in study.solve_rates_models():
        sized = solve_rate_time(study, model, workdir)
        if sized is None:
            continue
        own = study.models[model].resources.get("solve_rates", {}).get("runtime")
        given = (f"runtime {own} min, as models.{model}.resources.solve_rates.runtime sets it; sized: " if own
                 else "runtime sized at ")
        lines.append(f"solve rates of {model}: {given}{sized.arithmetic()} (a model's resources.solve_rates.runtime or "
                     f"--set-resources solve_rates:runtime=<minutes> overrides it; each finished part of "
                     f"{get_backend(study.models[model].backend).solve_rate_part} prompts is kept for a retry)")
    return lines


def runtime_sizing(study: Study, runtime: int, limit: int, workdir: Path = Path(".")) -> str:
    """What a refusal of the solve-rate rule's `runtime` above a partition's `limit` adds where this module sized it:
    the arithmetic, and that a runtime within the limit finishes over several attempts, each resuming from the parts
    kept; "" where the runtime was given."""
    sized = [time for model in study.solve_rates_models()
             if (time := solve_rate_time(study, model, workdir)) and sized_runtime(study, model, workdir) == runtime]
    if not sized:
        return ""
    model = sized[0].model
    part = get_backend(study.models[model].backend).solve_rate_part
    return (f" (sized for the solve rates of {model}: {sized[0].arithmetic()}; with runtime {limit} the job finishes "
            f"over ⌈{runtime} / {limit}⌉ = {math.ceil(runtime / limit)} attempts, each resuming from the parts of "
            f"{part} prompts kept: set models.{model}.resources.solve_rates.runtime to {limit} and the profile's "
            f"retries to at least {math.ceil(runtime / limit) - 1}, or measure fewer prompts or shorter answers)")
