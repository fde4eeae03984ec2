"""Which scenario tables a study gets (report/scenarios.py builds them): one per campaign that trains a prompt
selection, with its cells, methods, score columns and regime labels. Pandas-free: the rules read it while the DAG is
built (tests/test_catalogue.py checks the modules a dry run imports)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from dataflex_rl.artefacts import layout

# A regime transform's label in the round metrics, and whether the best kept set holds the least or the most of it.
LABELS = {"noisy_rewards": ("corrupted", "min"), "unbalanced": ("target", "max"), "low_utility": ("easy", "min")}


@dataclass(frozen=True)
class ScenarioTable:
    """What one campaign's table shows: its cells and methods (in the config's order), the score column of each cell
    (None: the headline), each cell's regime label, and each method's |P_v| where the methods differ in it; and where
    its methods draw validation prompts from a benchmark (the paper's Table 3), that benchmark's `splits`: {benchmark:
    {items, draws, scores: [[cell, method, seed, score file], ...]}}, scored apart on its validation and its test
    items (prompt_selection.benchmark_split)."""

    name: str
    cells: tuple[str, ...]
    methods: tuple[str, ...]
    metrics: Mapping[str, str | None]
    labels: Mapping[str, str | None]
    validation_sizes: Mapping[str, int]
    splits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else value
                for key, value in asdict(self).items()}


def scenario_specs(study) -> list[ScenarioTable]:
    """One table per campaign of `study` (dataflex_rl.study.resolved.Study) that trains a prompt-selection method."""
    specs = []
    for campaign in study.campaigns:
        if campaign.name is None or not any(study.methods[m].family.tables for m in campaign.methods):
            continue
        cells = campaign.cells()
        regimes = {cell.name: study.regimes[cell.regime] if cell.regime else None for cell in cells}
        sizes = {m: study.methods[m].resolved_params().get("validation_size") for m in campaign.methods
                 if study.methods[m].family.tables}
        varying = len({size for size in sizes.values() if size is not None}) > 1
        specs.append(ScenarioTable(
            name=campaign.name, cells=tuple(cell.name for cell in cells), methods=campaign.methods,
            metrics={name: f"domain:{regime.evaluation_domain}" if regime and regime.evaluation_domain else None
                     for name, regime in regimes.items()},
            labels={name: LABELS[regime.transform][0] if regime and regime.transform in LABELS else None
                    for name, regime in regimes.items()},
            validation_sizes={m: size for m, size in sizes.items() if size is not None} if varying else {},
            splits=_splits(study, campaign, cells)))
    return specs


def _splits(study, campaign, cells) -> dict[str, dict[str, Any]]:
    """ScenarioTable.splits of a campaign: the benchmarks its methods draw validation prompts from, each with its items
    file, the study's validation draws on it and the campaign's score files of it."""
    benchmarks = dict.fromkeys(b for m in campaign.methods if (b := study.methods[m].validation_benchmark()))
    return {benchmark: {"items": layout.benchmark_items(benchmark),
                        "draws": study.benchmark_validation_draws(benchmark),
                        "scores": [[cell.name, method, seed, layout.score(cell.model, run, benchmark)]
                                   for cell in cells for method, seed, run in study.cell_runs(cell)
                                   if method in campaign.methods]}
            for benchmark in benchmarks}
