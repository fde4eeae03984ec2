"""The study, resolved once: a typed, defaults-filled view of a validated config, and each job's settings slice.

Every default lives here (or in the dataclass a section resolves to), not in the rules. A job's *slice* is the flat
mapping {config key: resolved value} of everything its result depends on, upstream jobs included: the rules pass it
as a `params:` value, so Snakemake replans exactly the jobs whose slice changed (a score is held to its slice by the
fingerprint of its provenance record instead, so that both scoring layouts share it: rules/common.smk,
`rescored_when_stale`), and the job writes its fingerprint (`provenance.fingerprint(slice)`) beside its outputs. Keys are config paths (`training.learning_rate`,
`methods.difffilter.params.low`, `models.tiny-qwen2.shape.hidden_size`), so a stale artefact names the keys that
changed. Settings that cannot change a result stay out of every slice: `training.checkpoint_every` (a resumed run is
bit-identical), `evaluation.seed` under greedy decoding, a method's control (read by the tables only), the
calibration gates (a gate passes or stops the DAG; it changes no artefact), the token caps a job holds its texts to
(`data_validation.*.max_prompt_tokens`, `max_answer_tokens`: gates too, dataflex_rl.corpus.token_caps), the quarantine
gates' `data_validation.*.max_quarantine_fraction` (dataflex_rl.corpus.quarantine_gate), threads.

Importing this module does not import torch: `snakemake -n` stays fast.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Iterable, Mapping

from dataflex_rl.artefacts import layout
from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.item_sources.registry import REGISTRY, registry_order
from dataflex_rl.evaluate.benchmark_fit import benchmark_token_caps
from dataflex_rl.evaluate.settings import EvaluationSettings
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.artefacts.layout import FULL_DATA, UNTRAINED, parse_run, run_id, run_name, study_cell
from dataflex_rl.policies.catalogue import CATALOGUE, Role
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.regimes.catalogue import REGIMES, regime_params
from dataflex_rl.config.sections import as_float, filled
from dataflex_rl.corpus.prompting import DEFAULT_TEMPLATE
from dataflex_rl.corpus.token_caps import TokenCaps
from dataflex_rl.corpus.training_fit import corpus_token_caps
from dataflex_rl.corpus.validation_settings import ValidationSettings

# Training settings that cannot change a run's result (a checkpointed, resumed run is bit-identical).
RESULT_NEUTRAL_TRAINING = ("checkpoint_every",)
# A train slice's key for the validation draws its corpus holds out (Study.validation_draws): the prompt-selection
# methods' `validation_size` and `validation_seed` on that corpus, which every run on it depends on.
HELD_OUT_KEY = "validation_draws"


@dataclass(frozen=True)
class BenchmarkSettings:
    names: tuple[str, ...]
    items: int = 100
    seed: int = 1000
    files: Mapping[str, str | list[str]] = field(default_factory=dict)  # a benchmark may be several files
    hub_fallback: bool = False


@dataclass(frozen=True)
class CorpusSettings:
    sources: tuple[str, ...]
    items_per_domain: int
    seed: int
    files: tuple[Mapping[str, Any], ...] = ()

    @property
    def domains(self) -> tuple[str, ...]:
        """The domains the corpus draws from (its procedural sources' and its files' declared domains), in the order
        the prompt stream and the mixtures see them (sorted)."""
        domains = {REGISTRY[name].domain for name in self.sources if name in REGISTRY}
        domains |= {entry["domain"] for entry in self.files if entry.get("domain")}
        return tuple(sorted(domains))


@dataclass(frozen=True)
class DecontaminationSettings:
    threshold: float = 0.8


@dataclass(frozen=True)
class CalibrationSettings:
    min_base_parse_rate: float = 0.0


@dataclass(frozen=True)
class StatsSettings:
    confidence: float = 0.95
    bootstrap_resamples: int = 9999
    seed_subsets: int = 200
    mde_seed_counts: tuple[int, ...] = (3, 6, 12)
    curve_window: int = 10
    pairing: str = "paired"
    equivalence_margin: float = 1.0
    # the dry run's power plan (dataflex_rl.study.power_plan, docs/study-planning.md); no table reads them
    power: float = 0.8
    alpha: float = 0.05
    target_mde: float | None = None
    variance_from: str | None = None

    @property
    def planned_effect(self) -> float:
        """The effect in points the power plan sizes the seeds for: `target_mde`, else the equivalence margin, the
        smallest difference the study calls consequential (docs/study-planning.md)."""
        return self.equivalence_margin if self.target_mde is None else self.target_mde


# Statistics settings that change no table: the training-curves window and the power plan's.
TABLE_NEUTRAL_STATS = ("curve_window", "power", "alpha", "target_mde", "variance_from")


@dataclass(frozen=True)
class PartitionLimits:
    """A Slurm partition's limits (cluster.partitions.<p>); None: not limited."""

    gpus_per_node: int | None = None
    cpus_per_node: int | None = None
    mem_mb_per_node: int | None = None
    max_runtime: int | None = None


@dataclass(frozen=True)
class Run:
    """A training run: (model, method, seed) on a data regime (None: the clean corpus as built) for a step budget."""

    model: str
    method: str
    seed: int
    regime: str | None = None
    steps: int = 0

    @property
    def name(self) -> str:
        """The `{run}` wildcard value (dataflex_rl.artefacts.layout)."""
        return run_name(self.method, self.seed, self.regime, self.steps)

    @property
    def line(self) -> tuple:
        """The run without its step budget: every budget of a line continues the same training."""
        return self.model, self.regime, self.method, self.seed


@dataclass(frozen=True)
class RegimeSpec:
    """A named data regime: a corpus or reward transform (dataflex_rl.regimes) with its parameters (the transform's
    defaults filled in) and seed, and its parameters as the config writes them (`written`: what the dry run checks)."""

    name: str
    transform: str
    params: Mapping[str, Any]
    seed: int = 0
    written: Mapping[str, Any] = field(default_factory=dict)

    @property
    def needs_solve_rates(self) -> bool:
        """The transform reads the untrained base's measured solve rates (low_utility)."""
        return REGIMES[self.transform].needs_solve_rates

    @property
    def evaluation_domain(self) -> str | None:
        """The domain a prompt selection draws its validation prompts from (the unbalanced pool's target), or None:
        any. Every cell is scored on every benchmark, so that its summaries compare with the other cells'; the
        target domain's score is the summaries' `domain:<target>` column."""
        return self.params.get("target_domain") if self.transform == "unbalanced" else None


@dataclass(frozen=True)
class Campaign:
    """A block of the study design: models × regimes × step budgets × methods × seeds. A config without `campaigns`
    is one campaign without a name over everything it declares."""

    name: str | None
    models: tuple[str, ...]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    regimes: tuple[str | None, ...]
    steps: tuple[int, ...]

    def cells(self) -> list["Cell"]:
        """The campaign's study cells: one per (model, regime, step budget); a campaign without a name has one cell
        per model, named after it."""
        cells = []
        for model in self.models:
            for regime in self.regimes:
                for steps in self.steps:
                    name = model if self.name is None else study_cell(
                        model, self.name, regime, steps if len(self.steps) > 1 else None)
                    runs = tuple(Run(model, method, seed, regime, steps) for method in self.methods
                                 for seed in self.seeds)
                    cells.append(Cell(name, model, self.name, regime, runs))
        return cells


@dataclass(frozen=True)
class Cell:
    """What the records and tables call a model: a campaign's (model, regime, step budget) with its runs. A run in
    several campaigns is recorded once per cell it belongs to (the released records do the same)."""

    name: str
    model: str
    campaign: str | None
    regime: str | None
    runs: tuple[Run, ...]

    @property
    def extras(self) -> dict[str, Any]:
        """The record columns beside `model` that say what the cell is (none for a study without campaigns)."""
        if self.campaign is None:
            return {}
        return {"base_model": self.model, "campaign": self.campaign, "regime": self.regime}


def _method(name: str, entry: Mapping[str, Any]) -> MethodSpec:
    spec = CATALOGUE[entry["policy"]]
    kinds = {param: declared.kind for param, declared in spec.accepted().items()}
    params = {key: as_float(value) if kinds.get(key) == "float" else value
              for key, value in (entry.get("params") or {}).items()}
    return MethodSpec(name=name, policy=entry["policy"], params=_canonical(params), family=spec.family,
                      control=entry.get("control"))


def _regime(name: str, entry: Mapping[str, Any]) -> RegimeSpec:
    """A regime with its transform's defaults filled in (dataflex_rl.regimes.catalogue)."""
    written = _canonical(regime_params(entry))
    return RegimeSpec(name, entry["transform"], _canonical(REGIMES[entry["transform"]].with_defaults(written)),
                      int(entry.get("seed", 0)), written)


def _campaigns(config: Mapping[str, Any]) -> tuple[Campaign, ...]:
    """The campaigns of a config; each list a campaign leaves out is the study's (every model, every method, the
    top-level seeds, the full data, `training.steps`)."""
    everything = {"models": tuple(config["models"]), "methods": tuple(config["methods"]),
                  "seeds": tuple(int(s) for s in config["seeds"]), "regimes": (FULL_DATA,),
                  "steps": (int(config["training"].get("steps", GRPOSettings.steps)),)}
    declared = config.get("campaigns")
    if not declared:
        return (_campaign(None, everything, {}),)
    return tuple(_campaign(name, everything, entry or {}) for name, entry in declared.items())


def _campaign(name: str | None, everything: Mapping[str, tuple], entry: Mapping[str, Any]) -> Campaign:
    picked = {key: tuple(entry.get(key, default)) for key, default in everything.items()}
    # seeds in ascending order: a seed list is a set of matched replicates, so a reordered one plans the same jobs
    return Campaign(name, picked["models"], picked["methods"], tuple(sorted(int(s) for s in picked["seeds"])),
                    tuple(None if r == FULL_DATA else r for r in picked["regimes"]),
                    tuple(int(s) for s in picked["steps"]))


def _canonical(value: Any) -> Any:
    """`value` with every mapping's keys in sorted order: Snakemake records a params value by its repr, so a config
    that only lists the same keys in another order must give the same params."""
    if isinstance(value, Mapping):
        return {key: _canonical(value[key]) for key in sorted(value, key=str)}
    if isinstance(value, (list, tuple)):
        return [_canonical(item) for item in value]
    return value


def _flat(prefix: str, value: Any) -> dict[str, Any]:
    """{prefix.key...: leaf} for nested mappings; lists and other values are leaves (tuples become lists)."""
    if isinstance(value, Mapping):
        flat: dict[str, Any] = {}
        for key in sorted(value, key=str):
            flat.update(_flat(f"{prefix}.{key}", value[key]))
        return flat
    return {prefix: _canonical(value)}


def _validation(section: str, settings: ValidationSettings) -> dict[str, Any]:
    """The flat slice entries of a `data_validation` section: its row checks that differ from their defaults (the
    gates change no artefact: dataflex_rl.corpus.validation_settings)."""
    return _flat(f"data_validation.{section}", settings.row_checks())


def _memoised(method):
    """Compute once per study and arguments (a slice, the cells, the runs): the dry run of a large matrix asks for the
    same upstream slices and the same runs thousands of times. Callers get the shared value and must not change it."""
    @functools.wraps(method)
    def cached(self, *args):
        cache = self.__dict__.setdefault("_slices", {})
        key = (method.__name__, args)
        if key not in cache:
            cache[key] = method(self, *args)
        return cache[key]
    return cached


def _draws(methods: Iterable[MethodSpec]) -> list[list[int]]:
    """The validation draws of these prompt selections, [validation_size, validation_seed] each, sorted, once each."""
    draws = {(params["validation_size"], params["validation_seed"])
             for params in (method.resolved_params() for method in methods)}
    return [list(draw) for draw in sorted(draws)]


def _sorted(slice_: Mapping[str, Any]) -> dict[str, Any]:
    """Keys in one order, so that Snakemake's record of a params value (its repr) changes only with its content."""
    return {key: slice_[key] for key in sorted(slice_)}


@dataclass(frozen=True)
class Study:
    name: str
    template: str
    threads: int
    models: Mapping[str, ModelSpec]
    methods: Mapping[str, MethodSpec]
    training: GRPOSettings
    evaluation: EvaluationSettings
    benchmarks: BenchmarkSettings
    corpus: CorpusSettings
    decontamination: DecontaminationSettings
    calibration: CalibrationSettings
    stats: StatsSettings
    data_validation: Mapping[str, ValidationSettings]  # by section: corpus, benchmarks
    regimes: Mapping[str, RegimeSpec] = field(default_factory=dict)
    campaigns: tuple[Campaign, ...] = ()
    records_file: str | None = None
    # every model the config declares, trained by a campaign or not (`models`: those a campaign trains; an overlay of
    # campaigns on a study config need not train that config's own model): the dry run checks each
    declared_models: Mapping[str, ModelSpec] = field(default_factory=dict)
    # cluster.partitions: each Slurm partition's limits, which the dry run holds the rules' resource requests to
    partitions: Mapping[str, PartitionLimits] = field(default_factory=dict)
    # the sha256 of each corpus and benchmark file, by its path in the config (dataflex_rl.study.input_digests): in the
    # slices of the jobs that read them; empty where the caller has not looked at the files
    input_digests: Mapping[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "Study":
        """The study of a config that passed `config_checks.shape_errors`, without its input files' digests (the
        workflow adds them: `with_input_digests`)."""
        bench = config["benchmarks"]
        corpus = config["corpus"]
        declared = {name: ModelSpec.from_entry(name, entry) for name, entry in config["models"].items()}
        campaigns = _campaigns(config)
        trained = {model for campaign in campaigns for model in campaign.models}
        return cls(
            name=config["study"],
            template=config.get("prompt_template", DEFAULT_TEMPLATE),
            threads=int(config.get("threads_per_job", 1)),
            models={name: spec for name, spec in declared.items() if name in trained},
            methods={name: _method(name, entry) for name, entry in config["methods"].items()},
            training=filled(GRPOSettings, config["training"]),
            evaluation=filled(EvaluationSettings, config.get("evaluation")),
            benchmarks=filled(BenchmarkSettings, {**bench, "names": tuple(bench["names"]),
                                                  "files": _canonical(bench.get("files") or {})}),
            corpus=filled(CorpusSettings, {**corpus, "sources": tuple(corpus["sources"]),
                                           "files": tuple(_canonical(corpus.get("files") or ()))}),
            decontamination=filled(DecontaminationSettings, config.get("decontamination")),
            calibration=filled(CalibrationSettings, config.get("calibration")),
            stats=filled(StatsSettings, {k: tuple(v) if isinstance(v, list) else v
                                          for k, v in (config.get("stats") or {}).items()}),
            data_validation={section: ValidationSettings.for_section(section, (config.get("data_validation") or {})
                                                                     .get(section))
                             for section in ("corpus", "benchmarks")},
            regimes={name: _regime(name, entry) for name, entry in (config.get("regimes") or {}).items()},
            campaigns=campaigns,
            records_file=config.get("records_file"),
            declared_models=declared,
            partitions={name: filled(PartitionLimits, limits)
                        for name, limits in ((config.get("cluster") or {}).get("partitions") or {}).items()},
        )

    def with_input_digests(self, input_digests: Mapping[str, str | None]) -> "Study":
        """The study with its input files' contents (dataflex_rl.study.input_digests.input_digests), so that a replaced
        file replans what reads it."""
        return replace(self, input_digests=dict(input_digests))

    @_memoised
    def model_training(self, model: str) -> GRPOSettings:
        """The training settings of `model`'s jobs: the study's `training`, with the model's own over them
        (`models.<m>.training`, e.g. the response length a model of 4k positions holds). Its slices record the value
        a job used under the study's key (`training.max_new_tokens`), so that a model's own value equal to the study's
        reruns nothing, and a change of either reruns exactly the jobs of the models it applies to."""
        return replace(self.training, **self.declared_models[model].own("training"))

    @_memoised
    def model_evaluation(self, model: str) -> EvaluationSettings:
        """The evaluation settings of `model`'s score jobs: the study's `evaluation`, with the model's own over them
        (`models.<m>.evaluation`; as model_training)."""
        return replace(self.evaluation, **self.declared_models[model].own("evaluation"))

    def methods_trained_on(self, model: str) -> dict[str, MethodSpec]:
        """The methods the study trains on `model`, in the config's order (none for a model in no campaign)."""
        trained = {run.method for run in self.runs if run.model == model}
        return {name: spec for name, spec in self.methods.items() if name in trained}

    # --- the matrix ---------------------------------------------------------------------------------------------
    @_memoised
    def cells(self) -> list[Cell]:
        """Every study cell of every campaign, in the config's order."""
        return [cell for campaign in self.campaigns for cell in campaign.cells()]

    @property
    @_memoised
    def runs(self) -> list[Run]:
        """Every training run once, in the order the campaigns first name it; every method of a cell shares its seed
        list, so seeds are matched by construction."""
        return list(dict.fromkeys(run for cell in self.cells() for run in cell.runs))

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(run.seed for run in self.runs))

    def scored_runs(self) -> list[tuple[str, str]]:
        """(model, run wildcard) of every scored run: each model's untrained base, then the trained runs."""
        return [(model, UNTRAINED) for model in self.models] + [(run.model, run.name) for run in self.runs]

    def run(self, model: str, run: str) -> Run:
        """The trained run a `{run}` wildcard value names."""
        key = parse_run(run)
        return Run(model, key.method, key.seed, key.regime, key.steps)

    def previous_budget(self, run: Run) -> Run | None:
        """The run of the same line with the largest smaller step budget, if the study trains one: the longer run
        continues its checkpoint, so it must finish first."""
        shorter = [steps for steps in self._budgets()[run.line] if steps < run.steps]
        return replace(run, steps=shorter[-1]) if shorter else None

    @_memoised
    def _budgets(self) -> dict[tuple, list[int]]:
        """Each training line's step budgets, ascending (asked once per train job of a dry run)."""
        budgets: dict[tuple, list[int]] = {}
        for run in self.runs:
            budgets.setdefault(run.line, []).append(run.steps)
        return {line: sorted(steps) for line, steps in budgets.items()}

    def regime_corpora(self) -> list[tuple[str, str]]:
        """(regime, model) of every regime corpus a run trains on."""
        return list(dict.fromkeys((run.regime, run.model) for run in self.runs if run.regime))

    def solve_rates_models(self) -> list[str]:
        """The models whose untrained base's solve rates a regime transform reads (low_utility)."""
        return list(dict.fromkeys(model for regime, model in self.regime_corpora()
                                  if self.regimes[regime].needs_solve_rates))

    def training_token_caps(self, model: str) -> TokenCaps | None:
        """The longest prompt and gold answer, in tokens, a model's base build and train jobs accept
        (dataflex_rl/corpus/training_fit.py): gates, not settings of a result (a corpus within them trains exactly as
        before), so the rules give them as derived params, out of Snakemake's rerun trigger."""
        spec = self.models[model]
        return corpus_token_caps(f"models.{model}", spec.settings, self.model_training(model).max_new_tokens,
                                 self.data_validation["corpus"], spec.setting_key("training", "max_new_tokens"))

    def score_token_caps(self, model: str) -> TokenCaps | None:
        """The prompt and answer caps, in tokens, a model's score jobs hold their benchmarks to at their start
        (dataflex_rl/evaluate/benchmark_fit.py; gates, as `training_token_caps`)."""
        spec = self.models[model]
        return benchmark_token_caps(f"models.{model}", spec.settings, self.model_evaluation(model).max_new_tokens,
                                    self.data_validation["benchmarks"],
                                    spec.setting_key("evaluation", "max_new_tokens"))

    def max_quarantine_fraction(self, section: str) -> float:
        """The quarantine gate's threshold for `section` ("corpus" or "benchmarks")."""
        return self.data_validation[section].max_quarantine_fraction

    @_memoised
    def validation_draws(self, model: str, regime: str | None) -> list[list[int]]:
        """The validation draws, [validation_size, validation_seed] each (sorted, once each), of the prompt-selection
        methods the study trains on `model`'s corpus of `regime`: the rows they draw are held out of every run on
        that corpus, whatever its method (prompt_selection.candidates.held_out_rows), so that every arm of a cell
        trains on the same pool. [] where no prompt selection draws its validation prompts from it (none trains on
        it, or each reads its own `validation` file): nothing is held out."""
        return _draws(spec for run in self.runs if (run.model, run.regime) == (model, regime)
                      and (spec := self.methods[run.method]).validation_from_corpus())

    def held_out_draws(self, run: Run) -> list[list[int]]:
        """The validation draws `run` holds out (validation_draws), less the one a prompt selection draws itself:
        [] where that is all there is, so that such a run's job and slice are those of a study holding nothing out
        (its own validation prompts are out of its pool either way)."""
        draws = self.validation_draws(run.model, run.regime)
        spec = self.methods[run.method]
        if spec.family.role is Role.PROMPT_SELECTION:
            params = spec.resolved_params()
            if draws == [[params["validation_size"], params["validation_seed"]]]:
                return []
        return draws

    def validation_files(self, run: Run) -> list[str]:
        """The file a run's prompt selection reads its validation prompts from (its `validation` file, or its
        validation benchmark's items: MethodSpec.validation_input), as a list: [] for one on corpus rows and for every
        other method."""
        path = self.methods[run.method].validation_input()
        return [path] if path else []

    @_memoised
    def benchmark_validation_draws(self, benchmark: str) -> list[list[int]]:
        """The validation draws, [validation_size, validation_seed] each (sorted, once each), of the prompt selections
        the study trains that draw their validation prompts from `benchmark` (`validation: {benchmark: ...}`): the
        items they draw are held out of that benchmark's test score in every run of the study
        (prompt_selection.benchmark_split), so that every arm is scored on the same test items. []: none does."""
        return _draws(spec for run in self.runs
                      if (spec := self.methods[run.method]).validation_benchmark() == benchmark)

    def controls(self) -> dict[str, str]:
        return {name: m.control for name, m in self.methods.items() if m.control}

    def families(self) -> dict[str, str]:
        """Each compared method's family (its policy's): what the equivalence summary groups by."""
        return {name: str(self.methods[name].family) for name in self.controls()}

    # --- slices: {config key: value} of everything a job's result depends on ------------------------------------
    @_memoised
    def corpus_slice(self) -> dict[str, Any]:
        return _sorted({**_flat("corpus", asdict(self.corpus)),
                        **self._digests("corpus.files.sha256", [entry["path"] for entry in self.corpus.files]),
                        **_validation("corpus", self.data_validation["corpus"])})

    def _digests(self, key: str, paths: list[str]) -> dict[str, Any]:
        """{key: the files' digests} where the study knows them (a study without input files: nothing)."""
        return {key: [self.input_digests.get(path) for path in paths]} if paths and self.input_digests else {}

    def hub_fallback(self, benchmark: str) -> bool:
        """benchmarks.hub_fallback as it applies to `benchmark`: always false for one with no hub source (a generated
        benchmark), so that the setting reruns only what it can change."""
        return self.benchmarks.hub_fallback and REGISTRY[benchmark].hub is not None

    @_memoised
    def benchmark_slice(self, benchmark: str) -> dict[str, Any]:
        b = self.benchmarks
        return _sorted({"benchmark": benchmark, "benchmarks.items": b.items, "benchmarks.seed": b.seed,
                        f"benchmarks.files.{benchmark}": b.files.get(benchmark),
                        **self._digests(f"benchmarks.files.{benchmark}.sha256",
                                        benchmark_paths(b.files[benchmark]) if benchmark in b.files else []),
                        "benchmarks.hub_fallback": self.hub_fallback(benchmark),
                        **_validation("benchmarks", self.data_validation["benchmarks"])})

    @_memoised
    def clean_corpus_slice(self) -> dict[str, Any]:
        """The decontaminated corpus: the corpus, every benchmark it is checked against (in the registry's order: a
        reordered `benchmarks.names` builds the same corpus, so it retrains nothing), and the detector."""
        picked = {**self.corpus_slice(), **_flat("decontamination", asdict(self.decontamination)),
                  "benchmarks.names": registry_order(self.benchmarks.names)}
        for benchmark in self.benchmarks.names:
            picked.update({k: v for k, v in self.benchmark_slice(benchmark).items() if k != "benchmark"})
        return _sorted(picked)

    @_memoised
    def base_slice(self, model: str) -> dict[str, Any]:
        """The base model: built from the clean corpus by the embedded backend, loaded from `path` by verl."""
        spec = self.models[model]
        picked = _flat(f"models.{model}", spec.result_settings[0])
        if spec.builds_base_model:
            picked.update(self.clean_corpus_slice(), prompt_template=self.template)
        return _sorted(picked)

    @_memoised
    def regime_slice(self, regime: str, model: str) -> dict[str, Any]:
        """A regime's training corpus: the clean corpus and the transform; a transform that reads the untrained base's
        solve rates (low_utility) depends on the model and on how they are measured too."""
        spec = self.regimes[regime]
        picked = {**self.clean_corpus_slice(),
                  **_flat(f"regimes.{regime}", {"transform": spec.transform, "params": spec.params, "seed": spec.seed})}
        if spec.needs_solve_rates:
            picked.update(self.solve_rates_slice(model))
        return _sorted(picked)

    @_memoised
    def solve_rates_slice(self, model: str) -> dict[str, Any]:
        """The untrained base's solve rate per clean-corpus prompt: K samples at the training temperature."""
        training = self.model_training(model)
        return _sorted({**self.base_slice(model), **self.clean_corpus_slice(), "prompt_template": self.template,
                        "training.rollouts": training.rollouts, "training.temperature": training.temperature,
                        "training.max_new_tokens": training.max_new_tokens})

    def _training(self, model: str, steps: int | None = None) -> dict[str, Any]:
        """The training settings of `model` that can change a run's result, for a step budget (default
        `training.steps`)."""
        picked = {k: v for k, v in asdict(self.model_training(model)).items() if k not in RESULT_NEUTRAL_TRAINING}
        return picked if steps is None else {**picked, "steps": steps}

    @_memoised
    def train_slice(self, run: Run) -> dict[str, Any]:
        spec = self.methods[run.method]
        corpus = self.regime_slice(run.regime, run.model) if run.regime else self.clean_corpus_slice()
        trained = _flat(f"models.{run.model}", self.models[run.model].result_settings[1])
        draws = self.held_out_draws(run)
        return _sorted({**self.base_slice(run.model), **trained, **corpus, "prompt_template": self.template,
                        f"methods.{run.method}.policy": spec.policy,
                        **_flat(f"methods.{run.method}.params", spec.resolved_params()),
                        **({HELD_OUT_KEY: draws} if draws else {}),
                        **self._validation_source_slice(run),
                        "seed": run.seed, **_flat("training", self._training(run.model, run.steps))})

    def _validation_source_slice(self, run: Run) -> dict[str, Any]:
        """What a prompt selection's own validation prompts depend on: its file's digest, or its benchmark's slice."""
        spec = self.methods[run.method]
        if file := spec.validation_file():
            return self._digests(f"methods.{run.method}.params.validation.sha256", [file["path"]])
        if benchmark := spec.validation_benchmark():
            return {f"methods.{run.method}.params.validation.{key}": value
                    for key, value in self.benchmark_slice(benchmark).items()}
        return {}

    # --- a job's arguments: plain JSON-able values, every one of them result-determining ----------------------------
    def base_job(self, model: str) -> dict[str, Any]:
        return {"model": self.models[model].settings, "template": self.template}

    def regime_job(self, regime: str) -> dict[str, Any]:
        spec = self.regimes[regime]
        return {"transform": spec.transform, "params": dict(spec.params), "seed": spec.seed}

    def solve_rates_job(self, model: str) -> dict[str, Any]:
        training = self.model_training(model)
        return {"model": self.models[model].settings, "template": self.template,
                "sampling": {"rollouts": training.rollouts, "temperature": training.temperature,
                             "max_new_tokens": training.max_new_tokens}}

    def train_job(self, run: Run) -> dict[str, Any]:
        spec = self.methods[run.method]
        job = {"model": self.models[run.model].settings, "template": self.template, "seed": run.seed,
               "training": self._training(run.model, run.steps),
               "method": {"name": spec.name, "policy": spec.policy, "params": spec.params, "family": spec.family.name}}
        draws = self.held_out_draws(run)
        # a prompt selection's validation prompts come from the regime's evaluation domain, and every run on a corpus
        # a prompt selection trains on holds those prompts out
        if spec.family.role is Role.PROMPT_SELECTION or draws:
            job["target_domain"] = self.regimes[run.regime].evaluation_domain if run.regime else None
        if draws:
            job["validation_draws"] = draws
        return job

    def score_job(self, model: str) -> dict[str, Any]:
        return {"model": self.models[model].settings, "template": self.template,
                "evaluation": self.model_evaluation(model).scoring()}

    @_memoised
    def weights_slice(self, model: str, run: str) -> dict[str, Any]:
        """What the scored weights of run `run` (a `{run}` wildcard value) depend on (asked once per benchmark)."""
        return self.base_slice(model) if run == UNTRAINED else self.train_slice(self.run(model, run))

    @_memoised
    def _evaluation_slice(self, model: str) -> dict[str, Any]:
        return _flat("evaluation", self.model_evaluation(model).scoring())

    def score_slice(self, model: str, run: str, benchmark: str) -> dict[str, Any]:
        return _sorted({**self.weights_slice(model, run), **self.benchmark_slice(benchmark),
                        "prompt_template": self.template, **self._evaluation_slice(model)})

    def tables_slice(self) -> dict[str, Any]:
        """The study's tables: the records they read (which the tables' provenance names by checksum) and the statistics
        settings; the study name says whose config built them, where two configs share a tables folder."""
        neutral = {f"stats.{key}" for key in TABLE_NEUTRAL_STATS}
        stats = {key: value for key, value in _flat("stats", asdict(self.stats)).items() if key not in neutral}
        return _sorted({"study": str(self.name), "records_file": self.records_file, **stats,
                        "evaluation.max_cut_share": self.evaluation.max_cut_share,
                        **{f"methods.{method}.control": control for method, control in self.controls().items()},
                        **{f"methods.{method}.family": family for method, family in self.families().items()}})

    # --- what the audit expects on disk ----------------------------------------------------------------------------
    def _artefacts(self, model: str, run: str, benchmarks: list[str]) -> list[dict[str, Any]]:
        artefacts = []
        if run == UNTRAINED and self.models[model].builds_base_model:
            directory = layout.base_model(model)
            artefacts.append({"kind": "base model", "files": [directory],
                              "provenance": f"{directory}/{layout.PROVENANCE}", "settings": self.base_slice(model)})
        elif run != UNTRAINED:
            settings = self.train_slice(self.run(model, run))
            artefacts.append({"kind": "training", "files": [layout.run_model(model, run), layout.metrics(model, run)],
                              "provenance": layout.train_provenance(model, run), "settings": settings})
            if self.models[model].merges_checkpoint:
                merged = layout.merged_model(model, run)
                artefacts.append({"kind": "merged model", "files": [merged],
                                  "provenance": f"{merged}/{layout.PROVENANCE}", "settings": settings})
        artefacts += [{"kind": f"score:{b}", "benchmark": b, "files": [layout.score(model, run, b)],
                       "provenance": layout.score_provenance(model, run, b),
                       "settings": self.score_slice(model, run, b)} for b in benchmarks]
        return artefacts

    def _readers(self) -> list[str]:
        """The reports and tables, other than the cells' provenance records, that record the inputs their jobs read
        (dataflex_rl.artefacts.provenance): the decontamination audit, the gates, the regime audits, the solve rates and
        the records table; the audit compares what they read with what is on disk now. None for a records-only study."""
        if self.records_file:
            return []
        benchmarks = registry_order(self.benchmarks.names)
        return [layout.DECONTAMINATION_AUDIT, *map(layout.calibration, benchmarks),
                *map(layout.parse_gate, self.models), *(layout.regime_audit(r, m) for r, m in self.regime_corpora()),
                *map(layout.solve_rates, self.solve_rates_models()), layout.RECORDS]

    def random_prompt_methods(self) -> dict[str, str]:
        """Per cell with one, its first method drawing prompts at random (policy random_prompts): the reference of
        the prompt-selection composition table."""
        picked = {}
        for cell in self.cells():
            methods = [run.method for run in cell.runs if self.methods[run.method].policy == "random_prompts"]
            if methods:
                picked[cell.name] = methods[0]
        return picked

    def cell_runs(self, cell: Cell) -> list[tuple[str | None, int | None, str]]:
        """(method, seed, `{run}` wildcard) of a cell's scored runs: the untrained base, then its trained runs."""
        return [(UNTRAINED, None, UNTRAINED)] + [(run.method, run.seed, run.name) for run in cell.runs]

    def expected_artefacts(self) -> dict[str, Any]:
        """Every study cell's scored runs (the untrained base, each trained run) with their record run id, their
        artefacts' paths and the settings slices they should have been built with: the audit's input, plain JSON."""
        cells = []
        for cell in self.cells():
            for method, seed, run in self.cell_runs(cell):
                benchmarks = list(self.benchmarks.names)
                cells.append({"model": cell.name, "method": method, "seed": seed, "campaign": cell.campaign,
                              "run_id": run_id(cell.name, method, seed), "benchmarks": benchmarks,
                              "artefacts": self._artefacts(cell.model, run, benchmarks)})
        return {"study": self.name, "controls": self.controls(),
                "records": layout.RECORDS, "cells": cells, "readers": self._readers(),
                "tables": {"dir": layout.tables_dir(self.name), "provenance": layout.tables_provenance(self.name),
                           "records": self.records_file or layout.RECORDS, "settings": self.tables_slice()},
                "cell_methods": {cell.name: list(dict.fromkeys(run.method for run in cell.runs))
                                 for cell in self.cells()},
                "cell_campaigns": {cell.name: cell.campaign for cell in self.cells()}}
