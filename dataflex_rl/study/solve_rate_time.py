"""How a model's solve rates are measured as jobs (rule solve_rates: the untrained base's K samples per clean-corpus
prompt, which the low_utility regime reads; rule solve_rate_table puts the jobs' rates together), and the runtime the
dry run asks for each job where the model's backend states a decoding throughput (`solve_rate_throughput`: verl's
vLLM engine on the GPU type the job asks for, the model's resources.solve_rates.gpu_model, else on the slowest type
estimated; a profile's or the command line's gpu_model is not seen here); a backend without one (embedded) keeps the
rule's defaults.

The corpus is measured in chunks of the backend's `solve_rate_job_prompts` prompts, one job each, which Slurm runs
side by side on as many GPUs as it has (verl: 384 prompts; the embedded backend, whose samples come from one stream,
measures the whole corpus in one job). Their number is fixed at dry run from what it knows of the corpus: at most
`rows` prompts (its upper bound before decontamination and de-duplication: dataflex_rl.study.corpus_bound), so chunk i
holds the clean corpus's rows [i × size, (i + 1) × size) and the last one the rest, which may be none. A chunk's work
is at most its prompts × K samples (the model's training.rollouts) × max_new_tokens tokens (the model's own, else
training.max_new_tokens: every sample decoded to the cap, the worst case). Its runtime is that many tokens at the
backend's throughput, plus the engine's start, in whole minutes: sized so that the job does not time out under the
stated throughput, which no GPU run has calibrated yet. A model's own `resources.solve_rates.runtime` (or a
profile's set-resources, or --set-resources) replaces it; a job keeps each finished part (the backend's
`solve_rate_part` prompts), so an attempt cut short by its time limit loses only the part it was measuring, and a retry
resumes. The dry run holds it to `cluster.partitions`' max_runtime as every other job's runtime
(config_checks.resource_errors), or without them to its partition's time limit where sinfo answers
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
    """A solve-rate job's work and the runtime it is given: `rows` prompts at most (a chunk's, or the corpus's bound
    where it is smaller), of a corpus of at most `corpus_rows` in `chunks` jobs."""

    model: str
    rows: int
    corpus_rows: int
    made_of: str  # how the corpus's row bound is made up (corpus_rows_bound)
    chunks: int
    samples: int
    max_new_tokens: int
    length_key: str  # the setting max_new_tokens comes from: the model's own, or the study's
    tokens_per_second: float
    throughput: str  # how the summary names it: the type's estimate, or the lowest known (solve_rate_throughput)

    @property
    def tokens(self) -> int:
        return self.rows * self.samples * self.max_new_tokens

    @property
    def minutes(self) -> int:
        return START_MINUTES + math.ceil(self.tokens / self.tokens_per_second / 60)

    def arithmetic(self) -> str:
        source = (self.made_of if self.chunks == 1 else
                  f"one of {self.chunks} jobs over the corpus's {self.corpus_rows:,} at most: {self.made_of}")
        return (f"{self.rows:,} prompts at most ({source}) × K = {self.samples} samples (training.rollouts) × up to "
                f"{self.max_new_tokens:,} tokens ({self.length_key}) = {self.tokens:,} tokens at "
                f"{self.tokens_per_second:,.0f} tokens/s of one vLLM engine ({self.throughput}; batch-invariant, every "
                f"sample to the cap; calibrated on no GPU) + {START_MINUTES} min to start = {self.minutes:,} min")


_ROWS: dict[tuple[str, Path], tuple[int, str] | None] = {}


def _rows_bound(study: Study, workdir: Path) -> tuple[int, str] | None:
    """The corpus's row bound, counted once per process and corpus: every job parses the Snakefile, whose rule asks
    for it."""
    key = (repr(study.corpus), workdir)
    if key not in _ROWS:
        _ROWS[key] = corpus_rows_bound(study.corpus, workdir, math.inf)
    return _ROWS[key]


def chunk_count(study: Study, model: str, workdir: Path = Path(".")) -> int:
    """How many solve-rate jobs measure `model`'s corpus: its row bound over the backend's `solve_rate_job_prompts`,
    rounded up; one where the backend measures the corpus in one job or a corpus file cannot be counted (its own check
    refuses it)."""
    size = get_backend(study.models[model].backend).solve_rate_job_prompts
    bound = _rows_bound(study, Path(workdir).resolve())
    return 1 if size is None or bound is None else max(1, math.ceil(bound[0] / size))


def chunk_of(study: Study, model: str, index: int, workdir: Path = Path(".")) -> dict[str, int | None]:
    """Job `index`'s share of the clean corpus (rule solve_rates' `chunk` param): `index` of `of` chunks of `size`
    prompts (None: the whole corpus); dataflex_rl.study.jobs.chunk_rows picks its rows."""
    return {"index": index, "of": chunk_count(study, model, workdir),
            "size": get_backend(study.models[model].backend).solve_rate_job_prompts}


def solve_rate_time(study: Study, model: str, workdir: Path = Path(".")) -> SolveRateTime | None:
    """The sized solve-rate job of `model` (each of its chunks: the largest), None where its backend states no
    throughput or a corpus file cannot be counted (its own check refuses it)."""
    spec = study.models[model]
    backend = get_backend(spec.backend)
    bound = _rows_bound(study, Path(workdir).resolve())
    if backend.solve_rate_throughput is None or bound is None:
        return None
    rows, made_of = bound
    training = study.model_training(model)
    tokens_per_second, throughput = backend.solve_rate_throughput(spec.job_resources("solve_rates").get("gpu_model"))
    return SolveRateTime(model, min(rows, backend.solve_rate_job_prompts or rows), rows, made_of,
                         chunk_count(study, model, workdir), training.rollouts, training.max_new_tokens,
                         spec.setting_key("training", "max_new_tokens"), tokens_per_second, throughput)


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
    return (f" (sized for the solve rates of {model}: {sized[0].arithmetic()}; with runtime {limit} a job finishes "
            f"over ⌈{runtime} / {limit}⌉ = {math.ceil(runtime / limit)} attempts, each resuming from the parts of "
            f"{part} prompts kept: set models.{model}.resources.solve_rates.runtime to {limit} and the profile's "
            f"retries to at least {math.ceil(runtime / limit) - 1}, or measure fewer prompts or shorter answers)")
