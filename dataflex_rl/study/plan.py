"""The dry-run summary: the jobs a study runs from scratch, per rule, and the one screen printed before the job list.

Torch-free and independent of Snakemake: the Snakefile passes in each rule's merged resources. A test keeps
`planned_jobs` equal to Snakemake's own job stats for the default and paper studies.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from dataflex_rl.study.allocation import requested_hours, score_layout_lines, total_lines
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.artefacts.layout import FULL_DATA
from dataflex_rl.study.resolved import Study
from dataflex_rl.study.solve_rate_time import chunk_count, solve_rate_lines
from dataflex_rl.item_sources.registry import get_benchmark


def hub_benchmarks(study: Study, file_exists) -> list[str]:
    """The real benchmarks read from the hub (benchmarks.hub_fallback): no local file, or none of its files exists
    (`file_exists(path)`); procedural stand-ins are generated."""
    files = study.benchmarks.files
    return [name for name in study.benchmarks.names
            if not get_benchmark(name).procedural
            and not (name in files and any(file_exists(path) for path in benchmark_paths(files[name])))]


def run_jobs(study: Study, model: str) -> dict[str, int]:
    """The jobs one trained run of `model` adds (what a seed costs, per method: dataflex_rl.study.power_plan)."""
    return {"train": 1, "merge": int(study.models[model].merges_checkpoint), "score": _score_jobs_per_run(study)}


def _score_jobs_per_run(study: Study) -> int:
    return len(study.benchmarks.names) if study.evaluation.job_per_benchmark else 1


def planned_jobs(study: Study) -> dict[str, int]:
    """Jobs per rule of a run from scratch (Snakemake's job stats, printed after the plan, count what is left)."""
    if study.records_file:
        return {"tables": 1}
    benchmarks = len(study.benchmarks.names)
    return {
        "corpus": 1,
        "benchmark_items": benchmarks,
        "quarantine_gate": 1 + benchmarks,
        "calibrate": benchmarks,
        "decontaminate": 1,
        "base_model": sum(m.builds_base_model for m in study.models.values()),
        "solve_rates": sum(chunk_count(study, model) for model in study.solve_rates_models()),
        "solve_rate_table": len(study.solve_rates_models()),
        "regime_corpus": len(study.regime_corpora()),
        "train": len(study.runs),
        "merge": sum(run_jobs(study, run.model)["merge"] for run in study.runs),
        "score": len(study.scored_runs()) * _score_jobs_per_run(study),
        "parse_gate": len(study.models),
        "records": 1,
        "tables": 1,
        "training_curves": 1,
    }


def _campaign_lines(study: Study) -> list[str]:
    """Per campaign: models × regimes × step budgets × methods × seeds = its runs; then the distinct runs in all."""
    lines = []
    for campaign in study.campaigns:
        regimes = [r or FULL_DATA for r in campaign.regimes]
        factors = (f"{len(campaign.models)} model(s) × {len(regimes)} regime(s) × {len(campaign.steps)} step "
                   f"budget(s) × {len(campaign.methods)} method(s) × {len(campaign.seeds)} seed(s)")
        runs = len(campaign.models) * len(regimes) * len(campaign.steps) * len(campaign.methods) * len(campaign.seeds)
        label = f"campaign {campaign.name}: " if campaign.name else ""
        lines.append(f"  {label}{factors} = {runs} training runs")
        lines.append(f"    models {', '.join(campaign.models)}; regimes {', '.join(regimes)}; steps "
                     f"{', '.join(map(str, campaign.steps))}; seeds {', '.join(map(str, campaign.seeds))}")
    if len(study.campaigns) > 1:
        lines.append(f"  {len(study.runs)} distinct training runs in {len(study.cells())} study cells")
    return lines


def _unused_lines(study: Study) -> list[str]:
    """The models and regimes the config declares that no campaign uses, and which therefore nothing builds."""
    used_regimes = {regime for campaign in study.campaigns for regime in campaign.regimes}
    unused = {"models": [name for name in study.declared_models if name not in study.models],
              "regimes": [name for name in study.regimes if name not in used_regimes]}
    parts = [f"{kind} {', '.join(names)}" for kind, names in unused.items() if names]
    return [f"  declared but in no campaign, so not built: {'; '.join(parts)} (add them to a campaign's models or "
            f"regimes, or remove them)"] if parts else []


def _methods_table(study: Study) -> list[str]:
    rows = []
    for name, method in study.methods.items():
        params = ", ".join(f"{k}={v}" for k, v in sorted(method.params.items()))
        control = f"vs {method.control}" if method.control else "(reference)"
        rows.append(f"    {name:<14} {method.policy:<11} {method.family.name:<12} {control:<16} {params}".rstrip())
    return rows


def _benchmarks_line(study: Study) -> str:
    by_domain: dict[str, list[str]] = {}
    for name in study.benchmarks.names:
        by_domain.setdefault(get_benchmark(name).domain, []).append(name)
    return "; ".join(f"{domain} {len(names)} ({', '.join(names)})" for domain, names in sorted(by_domain.items()))


def model_notes(study: Study, workdir: Path) -> list[str]:
    """What each model's backend says about where its model comes from (a hub name the jobs will download), and the
    sized runtime of each solve-rate job with its arithmetic (dataflex_rl.study.solve_rate_time)."""
    if study.records_file:
        return []
    return [note for name, model in study.models.items()
            for note in get_backend(model.backend).model_notes(f"models.{name}", model, workdir)] + solve_rate_lines(
        study, workdir)


def _own_length_lines(study: Study) -> list[str]:
    """The models that answer at their own lengths (models.<m>.training / evaluation), over the study's in the job
    commands below."""
    lines = []
    for name, model in study.models.items():
        own = [f"{section}.max_new_tokens {settings.max_new_tokens}"
               for section, settings in (("training", study.model_training(name)),
                                         ("evaluation", study.model_evaluation(name)))
               if "max_new_tokens" in model.own(section)]
        if own:
            context = f" (context {model.declared_context} declared)" if model.declared_context else ""
            lines.append(f"  {name}{context} at its own lengths, over the study's in the commands below: "
                         f"{', '.join(own)}")
    return lines


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def matrix_summary(study: Study, jobs: Mapping[str, int],
                   resources: Mapping[str, Mapping[str, Any]], hub: list[str], models: list[str]) -> str:
    """One screen before the job list: the matrix, each method's policy/family/control and parameters, the
    benchmarks by domain, the backends and `models` (model_notes), per rule the planned jobs, the resources each job
    asks for and the GPU- and CPU-hours they request, in total too, and what the score layout trades."""
    lines = [f"DataFlex-RL study {study.name!r}"]
    if study.records_file:
        lines.append(f"  tables from the records in {study.records_file!r}: no training or scoring (target: tables)")
    else:
        training = study.training
        lines += _campaign_lines(study) + _unused_lines(study)
        lines.append(f"  GRPO {training.prompts_per_step} prompts × K={training.rollouts} per step; "
                     f"corpus domains {', '.join(study.corpus.domains)}")
        lines += [f"  regime {name}: {spec.transform}({', '.join(f'{k}={v}' for k, v in spec.params.items())}), "
                  f"seed {spec.seed}" for name, spec in study.regimes.items()]
    by_backend: dict[str, list[str]] = {}
    for name, model in study.models.items():
        label = f"{name} ({model.path})" if model.path and len(study.models) == 1 else name
        by_backend.setdefault(model.backend, []).append(label)
    lines.append(f"  models ({len(study.models)}): "
                 + "; ".join(f"{b}: {', '.join(ms)}" for b, ms in sorted(by_backend.items())))
    lines += [f"  {note}" for note in models]
    lines += _own_length_lines(study)
    selects = any(method.family.needs_probe for method in study.methods.values())
    for backend in sorted(by_backend):
        lines += [f"  {backend} {line}" for line in get_backend(backend).job_commands(
            study.training, study.evaluation, resources, prompt_selection=selects)]
    lines.append("  methods:    policy      family       control          params")
    lines += _methods_table(study)
    lines.append(f"  benchmarks ({len(study.benchmarks.names)}): {_benchmarks_line(study)}")
    if hub and not study.records_file:
        lines.append(f"  from the hub (benchmarks.hub_fallback): {', '.join(hub)}")
    lines += ["  jobs from scratch and resources per job:",
              f"    {'rule':<16}{'jobs':>6}{'threads':>9}{'cpus':>6}{'mem_mb':>9}{'gpu':>5}{'runtime':>9}"
              f"{'GPU-h':>11}{'CPU-h':>11}  partition"]
    for rule, count in jobs.items():
        if count:
            r = resources[rule]
            hours = requested_hours(count, r)
            lines.append(f"    {rule:<16}{count:>6}{r.get('threads', 1):>9}{r.get('cpus_per_task', '-'):>6}"
                         f"{r.get('mem_mb', '-'):>9}{r.get('gpu', '-'):>5}{r.get('runtime', '-'):>9}"
                         f"{_hours(hours and hours.gpu):>11}{_hours(hours and hours.cpu):>11}  "
                         f"{r.get('slurm_partition', '-')}")
    lines += total_lines(jobs, resources)
    if jobs.get("score"):
        lines += score_layout_lines(len(study.scored_runs()), len(study.benchmarks.names),
                                    study.evaluation.job_per_benchmark, resources["score"])
    return "\n".join(lines)
