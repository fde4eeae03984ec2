"""Every file a study's jobs read and write, per job: the look-ups rules/common.smk adapts to wildcards.

The rules name a job's outputs by their layout patterns (dataflex_rl.artefacts.layout); what a job reads, which gates it
still waits for and which files the study's `all` target lists depend on the study (its backends, its methods, its
calibration threshold, what is on disk), and are decided here, where they can be tested without Snakemake.
Torch-free: the Snakefile's parse imports it.
"""
from __future__ import annotations

from typing import Any

from dataflex_rl.artefacts import layout
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.artefacts.gates import pending
from dataflex_rl.artefacts.provenance import fingerprint
from dataflex_rl.report.outputs import figure_paths, table_paths
from dataflex_rl.report.scenario_specs import scenario_specs
from dataflex_rl.study.resolved import Study
from dataflex_rl.study.solve_rate_time import chunk_count


class StudyFiles:
    """The files of `study`'s jobs, its `benchmarks` in the registry's order; `hub_benchmarks` are the real ones read
    from the hub (dataflex_rl.study.plan.hub_benchmarks), which have no local file as an input."""

    def __init__(self, study: Study, benchmarks: list[str], hub_benchmarks: list[str]):
        self.study = study
        self.benchmarks = benchmarks
        self.hub_benchmarks = hub_benchmarks

    # --- the targets of `all` ----------------------------------------------------------------------------------
    def final_outputs(self) -> list[str]:
        """Every gate and every run's artefacts, not only the tables: Snakemake does not rebuild a deleted
        intermediate while the files downstream of it exist, so a lost checkpoint or score would otherwise go
        unnoticed. A config naming a `records_file` is a study regenerated from records alone: its products are the
        tables, without the training-curves figure, which needs the runs' metrics."""
        if self.study.records_file:
            return self.tables()
        return (self.gates() + self.base_models() + self.run_outputs() + self.scores() + [layout.RECORDS]
                + self.tables() + self.training_curves() + self.selection_tables() + self.scenario_tables())

    def gates(self) -> list[str]:
        return ([layout.quarantine_gate(name) for name in [layout.CORPUS_DATA, *self.benchmarks]]
                + [layout.calibration(b) for b in self.benchmarks]
                + [layout.parse_gate(m) for m in self.study.models])

    def base_models(self) -> list[str]:
        """The base model directory of each model whose backend builds one: a base lost to a killed job (written whole
        or not at all, so it is missing) is built again, not left missing behind the runs trained from it."""
        return [layout.base_model(model) for model, spec in self.study.models.items() if spec.builds_base_model]

    def run_outputs(self) -> list[str]:
        """Each trained run's model, metrics and provenance record, and its merged model where its backend merges."""
        return [path(run.model, run.name) for run in self.study.runs
                for path in (layout.run_model, layout.metrics, layout.train_provenance)] + [
            layout.merged_model(run.model, run.name) for run in self.study.runs
            if self.study.models[run.model].merges_checkpoint]

    def scores(self) -> list[str]:
        """Every (run, benchmark) score, the untrained base included."""
        return [layout.score(m, r, b) for m, r in self.study.scored_runs() for b in self.benchmarks]

    def tables_dir(self) -> str:
        return layout.tables_dir(self.study.name)

    def tables(self) -> list[str]:
        """The tables, the figures and their provenance record: a lost record is written again (the audit reads it to
        tell this config's tables from another's)."""
        return (table_paths(self.tables_dir()) + figure_paths(self.tables_dir())
                + [layout.tables_provenance(self.study.name)])

    def training_curves(self) -> list[str]:
        """The training-curves figure reads the runs' per-step metrics: none for a records-only study."""
        return [] if self.study.records_file else [layout.training_curves(self.study.name)]

    def conda_env(self, model: str) -> str:
        """The conda environment file of a model's jobs (relative to rules/): its backend's."""
        return get_backend(self.study.models[model].backend).conda_env

    def selection_runs(self) -> list[tuple[Any, Any]]:
        """(cell, run) of every run whose method's family adds the selection tables (prompt selection: they read its
        round metrics)."""
        return [(cell, run) for cell in self.study.cells() for run in cell.runs
                if self.study.methods[run.method].family.tables]

    def selection_tables(self) -> list[str]:
        """The selection tables, where a run's family adds them (none for a records-only study: no round metrics)."""
        return layout.selection_tables(self.study.name) if self.selection_runs() and not self.study.records_file else []

    def scenario_tables(self) -> list[str]:
        """The scenario tables, one per campaign training a prompt selection (none for a records-only study)."""
        if self.study.records_file:
            return []
        return layout.scenario_tables(self.study.name, [spec.name for spec in scenario_specs(self.study)])

    def scenario_split_inputs(self) -> list[str]:
        """The files the scenario tables read for a benchmark split into validation and test items (Table 3): its
        items and the campaign's score files of it (ScenarioTable.splits)."""
        return list(dict.fromkeys(path for spec in scenario_specs(self.study) for split in spec.splits.values()
                                  for path in [split["items"], *(score[-1] for score in split["scores"])]))

    # --- what a job reads --------------------------------------------------------------------------------------
    def training_corpus(self, model: str, run: str) -> str:
        """The corpus a run trains on: its regime's, or the clean corpus."""
        regime = layout.parse_run(run).regime
        return layout.regime_corpus(regime, model) if regime else layout.CORPUS_CLEAN

    def previous_budget(self, model: str, run: str) -> list[str]:
        """The provenance record of the same line's next shorter step budget, if the study trains one: this run
        continues its checkpoint, so it waits for it."""
        shorter = self.study.previous_budget(self.study.run(model, run))
        return [layout.train_provenance(shorter.model, shorter.name)] if shorter else []

    def base_model(self, model: str) -> str | list:
        """The base a run starts from where the backend builds it (rule base_model); [] (no input) where it loads
        `path`. A path, not a list of one, so that the job reads its input as one path."""
        return layout.base_model(model) if self.study.models[model].builds_base_model else []

    def scored_model(self, model: str, run: str) -> str | list:
        """The model directory a run is scored with: a trained run's final model (its merged Hugging Face directory
        where the backend merges), or the base the backend built ([], no input, for a backend that loads the untrained
        model from its `path`)."""
        spec = self.study.models[model]
        if run != layout.UNTRAINED and spec.merges_checkpoint:
            return layout.merged_model(model, run)
        if run != layout.UNTRAINED or spec.builds_base_model:
            return layout.scored_model(model, run)
        return []

    def scored_model_provenance(self, model: str, run: str) -> str | None:
        """The provenance record of the directory `scored_model` names (None: the untrained `path`)."""
        if run != layout.UNTRAINED and self.study.models[model].merges_checkpoint:
            return f"{layout.merged_model(model, run)}/{layout.PROVENANCE}"
        return layout.scored_model_provenance(model, run) if self.scored_model(model, run) else None

    def scored_benchmarks(self, benchmark: str | None) -> list[str]:
        """The benchmarks of one scoring job: its own under `evaluation.job_per_benchmark`, else all of them."""
        return [benchmark] if self.study.evaluation.job_per_benchmark else self.benchmarks

    def score_outputs(self, model: str, run: str, benchmarks: list[str]) -> list[str]:
        return [path(model, run, b) for b in benchmarks for path in (layout.score, layout.score_provenance)]

    def benchmark_files(self, benchmark: str) -> list[str]:
        """A real benchmark's local file(s), as inputs once they exist (procedural stand-ins and hub ones have none)."""
        entry = self.study.benchmarks.files.get(benchmark)
        return benchmark_paths(entry) if entry and benchmark not in self.hub_benchmarks else []

    def benchmark_digests(self, benchmark: str) -> list[str | None] | None:
        """The sha256 of each file of a benchmark read from files (dataflex_rl.study.input_digests), None for a
        generated one."""
        entry = self.study.benchmarks.files.get(benchmark)
        return [self.study.input_digests.get(path) for path in benchmark_paths(entry)] if entry else None

    def solve_rates(self, regime: str, model: str) -> list[str]:
        """The untrained base's solve rates a regime corpus reads, where its transform reads them (low_utility)."""
        return [layout.solve_rates(model)] if self.study.regimes[regime].needs_solve_rates else []

    def solve_rate_chunks(self, model: str) -> list[str]:
        """The solve rates of each job that measures `model`'s corpus, in corpus order (rule solve_rate_table's
        inputs)."""
        return [layout.solve_rate_chunk(model, index) for index in range(chunk_count(self.study, model))]

    def metrics_runs(self, cell_runs) -> list[dict[str, Any]]:
        """Each (cell, run)'s per-step metrics and train provenance record, with what the figures label it by."""
        return [{"path": layout.metrics(run.model, run.name), "provenance": layout.train_provenance(run.model, run.name),
                 "model": cell.name, "method": run.method, "seed": run.seed} for cell, run in cell_runs]

    def record_sources(self) -> list[dict[str, Any]]:
        """(score file, its provenance record, model, method, seed, benchmark, extras) of every score the records
        table is built from, per study cell (`model` is the cell's name; a run in several cells is recorded in each);
        and where prompt selections draw validation items from the benchmark, its `validation_split` (the items they
        hold out of its test score: validation_split)."""
        return [{"path": layout.score(cell.model, run, bench),
                 "provenance": layout.score_provenance(cell.model, run, bench),
                 "model": cell.name, "method": method, "seed": seed, "benchmark": bench, "extras": cell.extras,
                 **({"validation_split": split} if (split := self.validation_split(bench)) else {})}
                for cell in self.study.cells()
                for method, seed, run in self.study.cell_runs(cell)
                for bench in self.benchmarks]

    def validation_split(self, benchmark: str) -> dict[str, Any] | None:
        """The benchmark's items file and the validation draws held out of its test score
        (Study.benchmark_validation_draws); None where no prompt selection draws validation items from it."""
        draws = self.study.benchmark_validation_draws(benchmark)
        return {"items": layout.benchmark_items(benchmark), "draws": draws} if draws else None

    def split_items_files(self) -> list[str]:
        """The items files of the benchmarks the study splits into validation and test items (validation_split)."""
        return [split["items"] for bench in self.benchmarks if (split := self.validation_split(bench))]

    # --- the gates a job still waits for (dataflex_rl.artefacts.gates.pending) ---------------------------------
    def data_section(self, data: str) -> str:
        """The `data_validation` section of a quarantine gate's data (layout.CORPUS_DATA or a benchmark)."""
        return "corpus" if data == layout.CORPUS_DATA else "benchmarks"

    def data_fingerprint(self, data: str) -> str:
        """The fingerprint of the slice of the job that builds `data`: a gate report on other data is stale."""
        return fingerprint(self.study.corpus_slice() if data == layout.CORPUS_DATA
                           else self.study.benchmark_slice(data))

    def quarantine_gates(self, data: list[str]) -> dict[str, str]:
        """The quarantine gates of `data` (layout.CORPUS_DATA or benchmarks), each with its data's fingerprint."""
        return {layout.quarantine_gate(name): self.data_fingerprint(name) for name in data}

    def decontamination_gates(self) -> list[str]:
        """The quarantine gates of the corpus and every benchmark, which decontamination waits for."""
        return pending(self.quarantine_gates([layout.CORPUS_DATA, *self.benchmarks]),
                       [layout.CORPUS_CLEAN, layout.DECONTAMINATION_AUDIT])

    def calibration_gates(self, benchmark: str) -> list[str]:
        """The quarantine gate a benchmark's calibration waits for."""
        return pending(self.quarantine_gates([benchmark]), [layout.calibration(benchmark)])

    def base_model_gates(self, model: str) -> list[str]:
        return pending(_calibrations(self.benchmarks), [layout.base_model(model)])

    def training_gates(self, model: str, run: str) -> list[str]:
        """Every benchmark's calibration, and the model's parse gate unless `calibration.min_base_parse_rate` is 0
        (no parse rate is below it, so that gate cannot stop anything and training starts beside the untrained base's
        scoring instead of after it; the gate still runs and reports)."""
        gates = _calibrations(self.benchmarks)
        if self.study.calibration.min_base_parse_rate > 0:
            gates[layout.parse_gate(model)] = None
        return pending(gates, [layout.run_model(model, run), layout.metrics(model, run),
                               layout.train_provenance(model, run)])

    def score_gates(self, benchmarks: list[str], outputs: list[str]) -> list[str]:
        return pending(_calibrations(benchmarks), outputs)


def _calibrations(benchmarks: list[str]) -> dict[str, None]:
    return dict.fromkeys(layout.calibration(b) for b in benchmarks)
