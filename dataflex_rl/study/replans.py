"""Jobs planned again while Snakemake builds the DAG, for what its own rerun triggers cannot see: a damaged artefact,
and a score written with other settings than its slice now (rules/common.smk hands `force` the DAG's forced files).

A damaged artefact the study builds is rebuilt as a missing one would be, its job forced before any job runs, so
that no job downstream deletes its valid outputs and then fails on it (Snakemake's own --rerun-incomplete forces an
incomplete output the same way).

Why scores are held to their slices here rather than by Snakemake's params, as every other job: Snakemake records a
job's params with each of its outputs and reruns the job when they differ, so a score file written by a
one-job-per-run scoring job carries the slices of all the run's benchmarks, and one written under
`evaluation.job_per_benchmark` the slice of its own. Any params that keep one benchmark's change from rescoring the
run's other benchmarks therefore differ between the two layouts, and toggling the layout, which changes no score,
would rescore the whole study. The slices are derived params instead (rule score), out of Snakemake's params trigger,
and each score is held to its own slice here, by the fingerprint its record carries: the same check in both layouts,
so a score is reused whichever layout wrote it and rescored when its own slice changes. Costs a small JSON read per
finished score while the DAG is built.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable

from dataflex_rl.artefacts import layout
from dataflex_rl.artefacts.readable import settings_problem
from dataflex_rl.study.resolved import Study


class Replans:
    """`force(paths)` plans the jobs writing `paths` again; each problem is said on stderr once."""

    def __init__(self, study: Study, force: Callable[[Iterable[str]], None]):
        self.study = study
        self.force = force
        self.damage: dict[str, str | None] = {}
        self.said: set[str] = set()

    def rebuilt_when_damaged(self, path: str, problem_of: Callable[[str], str | None]) -> str:
        """`path`, after checking it once (`problem_of`, dataflex_rl/artefacts/readable.py): a damaged artefact's job is
        planned again to rebuild it."""
        if path not in self.damage:
            self.damage[path] = problem_of(path) if Path(path).is_file() else None
            if self.damage[path]:
                self.force([path])
                print(f"damaged: {self.damage[path]}\n  its job is planned again to rebuild it", file=sys.stderr)
        return path

    def rescored_when_stale(self, model: str, run: str, benchmarks: list[str], outputs: list[str]) -> None:
        """Plan a scoring job (its `outputs`) again when the provenance record of any of its `benchmarks`' scores was
        written with other settings than that score's slice now, or is damaged (readable.settings_problem)."""
        for benchmark in benchmarks:
            record = layout.score_provenance(model, run, benchmark)
            if not Path(record).is_file():
                continue
            problem = settings_problem(record, self.study.score_slice(model, run, benchmark))
            if problem:
                self.force(outputs)
                if problem not in self.said:
                    self.said.add(problem)
                    print(f"scores {problem}: their scoring jobs are planned again", file=sys.stderr)
