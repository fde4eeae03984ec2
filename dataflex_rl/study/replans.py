"""Jobs planned again while Snakemake builds the DAG, for what its own rerun triggers cannot see: a damaged artefact,
and a score written with other settings than its slice now (rules/common.smk hands `force` the DAG's forced files);
and jobs not planned again for a directory input rebuilt byte for byte, whose newer mtime Snakemake's triggers do see.

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
from typing import Any, Callable, Iterable

from dataflex_rl.artefacts import layout
from dataflex_rl.artefacts.provenance import artefact_digest
from dataflex_rl.artefacts.readable import recorded_input_digest, settings_problem
from dataflex_rl.study.resolved import Study


class Replans:
    """`force(paths)` plans the jobs writing `paths` again; each problem is said on stderr once."""

    def __init__(self, study: Study, force: Callable[[Iterable[str]], None]):
        self.study = study
        self.force = force
        self.damage: dict[str, str | None] = {}
        self.digests: dict[str, str] = {}  # a directory's artefact_digest, once per DAG build
        self.said: set[str] = set()

    def rebuilt_when_damaged(self, path: str, problem_of: Callable[[str], str | None], note: str = "") -> str:
        """`path`, after checking it once (`problem_of`, dataflex_rl/artefacts/readable.py): a damaged artefact's job is
        planned again to rebuild it (`note`: what else the stderr line says of it)."""
        if path not in self.damage:
            self.damage[path] = problem_of(path) if Path(path).is_file() else None
            if self.damage[path]:
                self.force([path])
                print(f"damaged: {self.damage[path]}\n  its job is planned again to rebuild it{note}", file=sys.stderr)
        return path

    def kept_when_unchanged(self, directory: str, records: list[str], ancient: Callable[[str], Any]) -> Any:
        """`directory`, an input directory, as the input of the job whose provenance `records` (one per output) name
        the bytes it read there: `ancient(directory)` where it is newer than a record but every record names the
        bytes it holds now, else `directory`. Snakemake reruns a job whose input is newer than its outputs unless it
        recorded the same checksum of it, which it does for files of up to 1 MB only, never for a directory: a base
        rebuilt byte for byte (after a killed or forced base_model job) would otherwise retrain every run. A directory
        with other bytes keeps its mtime's say; so does one read by a job not yet finished, and one older than its
        readers' records (its mtime reruns nothing, and a rebuild in this run still reruns its readers)."""
        if not Path(directory).is_dir():
            self._say_missing(directory, [record for record in records if Path(record).is_file()])
            return directory
        if not records or not all(Path(record).is_file() for record in records):
            return directory
        if _mtime(directory) <= min(Path(record).stat().st_mtime for record in records):
            return directory
        if directory not in self.digests:
            self.digests[directory] = artefact_digest(directory)
        unchanged = all(recorded_input_digest(record, directory) == self.digests[directory] for record in records)
        return ancient(directory) if unchanged else directory

    def _say_missing(self, directory: str, readers: list[str]) -> None:
        """Say once that `directory` is missing while finished jobs read it (`readers`: their records): Snakemake
        rebuilds it, and reruns each job that reads it in the same run, since it cannot compare a directory's bytes."""
        if readers and directory not in self.said:
            self.said.add(directory)
            print(f"{directory}: missing, though finished jobs read it (e.g. {readers[0]}): this run builds it again "
                  "and reruns every job that reads it; to keep them, rebuild it alone first, `snakemake --cores N "
                  f"{directory}`: where it comes back byte for byte, the next run finds them current", file=sys.stderr)

    def damaged(self, path: str) -> bool:
        """Whether `path` was found damaged (rebuilt_when_damaged)."""
        return bool(self.damage.get(path))

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


def _mtime(directory: str) -> float:
    """A directory's mtime as Snakemake reads it: that of the `.snakemake_timestamp` it touches in a directory output
    it finished, else the directory's own."""
    stamp = Path(directory) / ".snakemake_timestamp"
    return (stamp if stamp.is_file() else Path(directory)).stat().st_mtime
