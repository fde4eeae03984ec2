"""The dry run's power plan: before a study trains, how small a difference its planned seeds can detect, how many
seeds the effect it is after needs, and what those seeds cost (docs/study-planning.md).

Per study cell and summary: the minimum detectable effect at the cell's seeds, and the seeds `stats.target_mde` needs
(else the equivalence margin), for a two-sided paired t at `stats.alpha` with `stats.power`
(dataflex_rl.stats.power, the computation the detectable_effects table uses; its roots remembered in the working
directory, dataflex_rl.study.mde_cache). The SD of paired differences is the largest over the cell's method pairs
that the `stats.variance_from` records have (dataflex_rl.study.variance_source): one number that holds for every pair
it was taken over. Without a source, or for a cell or pair without a match, the
plan says so and gives the MDE in SDs. GPU- and CPU-hours are the cost plan's requested hours scaled by seeds: a seed
of a cell is one run per method, each its train, merge and score jobs at their runtimes (an untrained base is scored
once, whatever the seeds).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from dataflex_rl.artefacts.layout import RECORDS
from dataflex_rl.stats.power import minimum_detectable_effect, seeds_needed
from dataflex_rl.study.allocation import Hours, hours_text, requested_hours
from dataflex_rl.study.mde_cache import RememberedMdes
from dataflex_rl.study.plan import run_jobs
from dataflex_rl.study.resolved import Cell, Study

if TYPE_CHECKING:  # read records with pandas only where stats.variance_from names them: a dry run imports neither
    from dataflex_rl.study.variance_source import Spread, VarianceSource


def seed_hours(study: Study, cell: Cell, resources: Mapping[str, Mapping[str, Any]]) -> Hours | None:
    """The requested hours of one seed of `cell`: its methods' runs, each with its train, merge and score jobs; None
    where a rule has no runtime. Where cells share runs (a baseline in several campaigns) this counts them in each:
    the cost of the cell's seeds trained alone."""
    hours = [requested_hours(count, resources[rule]) for rule, count in run_jobs(study, cell.model).items() if count]
    if any(h is None for h in hours):
        return None
    runs = len(_methods(cell))
    return Hours(runs * sum(h.gpu for h in hours), runs * sum(h.cpu for h in hours))


def _methods(cell: Cell) -> list[str]:
    return list(dict.fromkeys(run.method for run in cell.runs))


def _pairs(study: Study, cell: Cell) -> list[tuple[str, str]]:
    """The cell's comparisons: each of its methods whose control it trains too (as the tables compare them)."""
    methods = _methods(cell)
    return [(method, control) for method, control in study.controls().items()
            if method in methods and control in methods]


def _cost(seeds: int, per_seed: Hours | None) -> str:
    if per_seed is None:
        return "hours unknown: a rule has no runtime"
    return hours_text(Hours(seeds * per_seed.gpu, seeds * per_seed.cpu))


def _read_source(study: Study, workdir: Path) -> tuple[VarianceSource | None, str]:
    """The variance source, or None and why there is none."""
    path = study.stats.variance_from
    if path is None:
        return None, "no variance source (stats.variance_from unset)"
    if Path(path) == Path(RECORDS) and not (workdir / path).exists():
        return None, f"no variance source yet: {path} (stats.variance_from) is this study's own records, not built"
    from dataflex_rl.study.variance_source import VarianceSource
    source = VarianceSource.read(path, workdir)
    if source.benchmarks != set(study.benchmarks.names):
        others = sorted(source.benchmarks ^ set(study.benchmarks.names))
        return None, (f"no variance source: {path} (stats.variance_from) scores other benchmarks than this study "
                      f"(differing: {', '.join(others)}), so its summaries are not this study's")
    return source, f"variance from {path} (stats.variance_from)"


def power_lines(study: Study, resources: Mapping[str, Mapping[str, Any]], workdir: str | Path = ".") -> list[str]:
    """The plan's lines for the dry-run summary, beside the cost plan; none for a records-only study (its tables
    report detectable effects after the fact)."""
    if study.records_file:
        return []
    s = study.stats
    target = s.planned_effect
    source, why = _read_source(study, Path(workdir))
    lines = [f"  power plan (docs/study-planning.md): two-sided paired t at α {s.alpha:g} (stats.alpha), "
             f"{s.power:.0%} power (stats.power), target {target:g} pt "
             f"({'stats.target_mde' if s.target_mde is not None else 'stats.equivalence_margin; or stats.target_mde'}"
             f"); hours = seeds × a seed's runs' train, merge and score jobs as requested above",
             f"    {why}" + ("; per summary the largest SD of paired differences over the cell's method pairs in it"
                            if source else "")]
    mdes = RememberedMdes(workdir)
    for cell in study.cells():
        lines += _cell_lines(study, cell, source, resources, target, mdes)
    mdes.save()
    return lines


def _cell_lines(study: Study, cell: Cell, source: VarianceSource | None,
                resources: Mapping[str, Mapping[str, Any]], target: float, mdes: RememberedMdes) -> list[str]:
    s = study.stats
    seeds = len({run.seed for run in cell.runs})
    steps = cell.runs[0].steps
    per_seed = seed_hours(study, cell, resources)
    unit = minimum_detectable_effect(1.0, seeds, s.power, s.alpha, mdes)
    head = (f"    {cell.name}: {seeds} seeds, a seed {len(_methods(cell))} runs "
            f"({_cost(1, per_seed)}); MDE {unit:.3f} × the SD of paired differences at {seeds} seeds")
    matched = source.matching_cells(cell, steps) if source else []
    if not matched:
        reason = "" if source is None else (f"; no source cell matches (none named {cell.name}, none of model "
                                            f"{cell.model} on {cell.regime or 'full data'} at {steps} steps)")
        return [head + reason]
    spreads: list[Spread] = []
    missing, ambiguous = [], []
    for method, control in _pairs(study, cell):
        having = source.cells_with(matched, method, control)
        if len(having) == 1:
            spreads += source.spreads(having[0], method, control)
        else:
            (ambiguous if having else missing).append(f"{method} − {control}"
                                                      + (f" (in {', '.join(having)})" if having else ""))
    lines = [head + f"; source cell(s) {', '.join(matched)}"]
    for summary in source.summary_names:
        usable = [x for x in spreads if x.summary == summary and x.n >= 2 and x.sd > 0]
        if not usable:
            lines.append(f"      {summary}: no spread to scale (no pair with two shared seeds and varying "
                         f"differences)")
            continue
        top = max(usable, key=lambda x: x.sd)
        mde = minimum_detectable_effect(top.sd, seeds, s.power, s.alpha, mdes)
        needed = seeds_needed(target, top.sd, s.power, s.alpha, mdes)
        lines.append(f"      {summary}: SD {top.sd:.2f} pt ({top.cell}, {top.method} − {top.control}, {top.n} seeds; "
                     f"the largest of {len(usable)} pair(s)) → MDE {mde:.2f} pt at {seeds} seeds "
                     f"({_cost(seeds, per_seed)}); {target:g} pt needs {needed} seeds ({_cost(needed, per_seed)})")
    if missing:
        lines.append(f"      no spread for {', '.join(missing)}: no matched source cell has both arms")
    if ambiguous:
        lines.append(f"      no spread for {', '.join(ambiguous)}: several source cells have both arms")
    return lines
