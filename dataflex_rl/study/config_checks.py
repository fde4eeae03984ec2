"""Why a study config would fail — found at dry-run time, before any job starts.

Two steps, so that the config is read once. `shape_errors` checks the raw config: the JSON schema
(config/schema.yaml) with messages that name the key, the bad value and the fix (a misspelt key gets a did-you-mean),
then the names a study is resolved from (each method's policy, each regime's transform). A config that passes it
resolves to a `Study` (dataflex_rl.study.resolved), and `study_errors` checks that: the checks a schema cannot express —
names that must exist in the benchmark registry, parameter ranges and the joint constraints of a policy with the study's
K rollouts, controls, files that must exist, and backend facts. `config_errors` runs both. `resource_errors` checks the
rules' resource requests (profile and command line) against the study's backends and cluster. docs/refusals.md lists
every refusal. Nothing here imports torch.
"""
from __future__ import annotations

import math
import re
from datetime import date, datetime
from pathlib import Path
from string import Formatter
from typing import Any, Iterable, Mapping

from dataflex_rl.study.campaign_checks import campaign_errors, transform_errors
from dataflex_rl.study.corpus_bound import corpus_rows_bound
from dataflex_rl.study.solve_rate_time import SIZED_RUNTIME, runtime_sizing
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.config.suggest import did_you_mean, known as _known
from dataflex_rl.policies.catalogue import CATALOGUE, Role, StudyShape
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.item_sources.paths import benchmark_paths
from dataflex_rl.item_sources.registry import REGISTRY
from dataflex_rl.artefacts.layout import RECORDS, UNTRAINED
from dataflex_rl.prompt_selection.candidates import SelectionSize
from dataflex_rl.artefacts.readable import parquet_problem
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.study.slurm_nodes import cluster_fit_errors, partition_requests
from dataflex_rl.training.step_draws import repeated_draw_problem
from dataflex_rl.study.resolved import Study
from dataflex_rl.corpus.prompting import render_prompt
from dataflex_rl.corpus.training_fit import prompt_token_cap

# Where a misplaced key belongs, for keys a study is likely to put in the wrong section.
_KEY_HINTS = {
    "seeds": "training seeds are the study-wide top-level `seeds` list, shared by every method so that each "
             "comparison is over matched seeds",
    "seed": "training seeds are the study-wide top-level `seeds` list",
    "num_perm": "decontamination no longer uses MinHash, so remove it; `threshold` is the share of a benchmark item's "
                "word 3-grams a training prompt must hold (docs: README, dataflex_rl/corpus/decontam.py)",
}


# --- the schema -----------------------------------------------------------------------------------------------------

def _path(parts) -> str:
    return ".".join(str(p) for p in parts) or "(top level)"


def _strict_validator(schema: Mapping[str, Any]):
    """The schema's validator, except that an integer is an int: JSON Schema counts 4.0 as an integer, which then
    reaches range(), a tensor shape or a layer size as a float and fails there with a traceback."""
    from jsonschema.validators import extend, validator_for

    base = validator_for(schema)
    checker = base.TYPE_CHECKER.redefine("integer", lambda _, value: isinstance(value, int)
                                         and not isinstance(value, bool))
    return extend(base, type_checker=checker)(schema)


def non_finite_errors(value: Any, parts: tuple = ()) -> list[str]:
    """Every number that is not finite (YAML's .nan, .inf, -.inf), wherever it is: no setting takes one, and a
    schema's minimum and maximum let NaN through (every comparison with it is false)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{_path(parts)}: {value} is not a finite number (YAML reads .nan and .inf as numbers); write the "
                f"number meant"]
    if isinstance(value, Mapping):
        return [error for key, item in value.items() for error in non_finite_errors(item, (*parts, key))]
    if isinstance(value, list):
        return [error for index, item in enumerate(value) for error in non_finite_errors(item, (*parts, index))]
    return []


def _reads_as_number(value: Any) -> bool:
    """Text that Python reads as a number, such as '1e-4' (YAML 1.1 reads exponent notation only with a '.')."""
    if not isinstance(value, str):
        return False
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def _number_fix(text: str) -> str:
    """How to write numeric text as a number: YAML 1.1 reads '1e-4' (an exponent without a '.') as text."""
    mantissa, exponent = text.strip().lower().partition("e")[::2]
    if not exponent:
        return "remove the quotes"
    return (f"YAML reads exponent notation without a decimal point as text — write "
            f"{mantissa if '.' in mantissa else mantissa + '.0'}e{exponent}")


_YAML_KINDS = {"date": "date", "datetime": "date and time", "int": "number", "float": "number", "bool": "boolean",
               "NoneType": "null (nothing)"}


def schema_errors(config: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Every way `config` breaks `schema`, one line each: the key, the value and what it must be."""
    validator = _strict_validator(schema)
    name_rule = schema.get("$defs", {}).get("name")  # the study's, the models' and the methods' names
    errors = []
    for error in sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path]):
        where = _path(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
            allowed = error.schema.get("properties", {})
            for key in sorted(set(error.instance) - set(allowed), key=str):
                hint = _KEY_HINTS.get(key, "")
                errors.append(f"{_path([*error.absolute_path, key])}: unknown key {key!r}"
                              f"{did_you_mean(key, allowed)} (allowed here: {_known(allowed)})"
                              + (f"; {hint}" if hint else ""))
        elif error.validator == "required":
            missing = error.message.split("'")[1]
            errors.append(f"{_path([*error.absolute_path, missing])}: required key is missing; add it")
        elif error.schema is name_rule and error.validator == "maxLength":
            errors.append(f"{where}: the name {error.instance[:20]!r}… is {len(error.instance)} characters long; it "
                          f"becomes a path component, so use at most {name_rule['maxLength']}")
        elif error.schema is name_rule and not isinstance(error.instance, str):
            text = error.instance.isoformat() if isinstance(error.instance, (date, datetime)) else error.instance
            kind = _YAML_KINDS.get(type(error.instance).__name__, type(error.instance).__name__)
            error_line = f"{where}: YAML reads {text} as a {kind}, not as a name; quote it: '{text}'"
            if error_line not in errors:  # the name rule's type and pattern both fail on it: one line
                errors.append(error_line)
        elif error.schema is name_rule:
            errors.append(f"{where}: the name {error.instance!r} is not allowed; it becomes a path and a wildcard "
                          f"value, so use letters, digits and '_', '.', '+', '-' (starting with a letter or digit)")
        elif error.validator == "type" and error.validator_value == "integer" and isinstance(error.instance, float):
            errors.append(f"{where}: {error.instance} is not an integer; write it without the decimal point")
        elif error.validator == "type" and error.validator_value in ("number", "integer") \
                and _reads_as_number(error.instance):
            errors.append(f"{where}: {error.instance!r} is text, not a number; {_number_fix(error.instance)}")
        elif error.validator == "enum":
            description = error.schema.get("description")
            fix = did_you_mean(error.instance, error.validator_value) or "; use one of these"
            errors.append(f"{where}: {error.message}" + (f" ({description})" if description else "") + fix)
        else:
            description = error.schema.get("description")
            hint = "; list each value once" if error.validator == "uniqueItems" else ""
            errors.append(f"{where}: {error.message}{hint}" + (f" ({description})" if description else ""))
    return errors


def policy_errors(methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A method whose policy is not in the catalogue (the study cannot be resolved without it)."""
    return [f"methods.{name}.policy: unknown policy {entry['policy']!r}{did_you_mean(entry['policy'], CATALOGUE)} "
            f"(known: {_known(CATALOGUE)})" for name, entry in methods.items() if entry["policy"] not in CATALOGUE]


def shape_errors(config: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """What must hold of the raw config before it resolves to a Study: finite numbers, the schema, then the names the
    study is resolved from."""
    return (non_finite_errors(config) or schema_errors(config, schema)
            or policy_errors(config["methods"]) + transform_errors(config.get("regimes") or {}))


def config_errors(config: Mapping[str, Any], schema: Mapping[str, Any], workdir: str | Path = ".") -> list[str]:
    """The raw config's shape errors, or — for a config of the right shape — its study's (which rely on it)."""
    return shape_errors(config, schema) or study_errors(Study.from_config(config), workdir)


# --- methods --------------------------------------------------------------------------------------------------------

def _method_params_errors(method: MethodSpec, shape: StudyShape) -> list[str]:
    spec = CATALOGUE[method.policy]
    name, params = method.name, method.params
    accepted = spec.accepted()
    key = f"methods.{name}.params"
    errors = []
    for param, value in params.items():
        if param not in accepted:
            errors.append(f"{key}.{param}: unknown parameter {param!r} for policy {spec.name!r}"
                          f"{did_you_mean(param, accepted)} (known: {_known(accepted) or 'none'})")
            continue
        problem = accepted[param].problem(value)
        if problem:
            errors.append(f"{key}.{param}: {value!r} {problem}")
    if errors:
        return errors  # the joint checks below assume valid single values
    if spec.family.matched_random_control and method.resolved_params()["control"] != "random":
        errors += [f"{key}.{option}: {params[option]!r} is only meaningful with `control: random` (the matched-random "
                   f"control); add it or remove {option}" + (f" — {_KEY_HINTS['seed']}" if option == "seed" else "")
                   for option in ("control_scope", "seed") if option in params]
    problems = spec.constraints(params, shape.domains) + spec.joint(params, shape)
    errors += [f"{key}.{param}: {problem}" for param, problem in problems]
    return errors


def _control_errors(method: MethodSpec, methods: Mapping[str, MethodSpec]) -> list[str]:
    spec = CATALOGUE[method.policy]
    name, control = method.name, method.control
    key = f"methods.{name}.control"
    if control is None:
        if spec.requires_control:
            return [f"{key}: missing; a {spec.family} method is compared with its control, a method whose policy is "
                    f"{' or '.join(spec.controls)} — add `control: <that method's name>`"]
        return []
    if control == name:
        return [f"{key}: a method cannot be its own control; name another method"]
    if control not in methods:
        return [f"{key}: {control!r} is not a method of this study{did_you_mean(control, methods)}; add it under "
                f"methods or change the control"]
    if not spec.controls:
        return [f"{key}: {control!r} — {name!r} runs policy {spec.name!r}, the reference every other method is "
                f"compared with; remove its control"]
    other = methods[control]
    matched_random = (spec.family.matched_random_control and other.policy == spec.name
                      and other.resolved_params()["control"] == "random")
    if other.policy not in spec.controls and not matched_random:
        allowed = " or ".join(spec.controls) + (" (or its own matched-random control)" if spec.family.matched_random_control
                                                else "")
        return [f"{key}: {control!r} runs policy {other.policy!r}; a {spec.family} method "
                f"({spec.name}) is compared with a method whose policy is {allowed} (DESIGN.md: baseline, or static "
                f"for mixtures) — change the control"]
    return []


def method_errors(study: Study) -> list[str]:
    shape = StudyShape(rollouts=study.training.rollouts, prompts_per_step=study.training.prompts_per_step,
                       domains=study.corpus.domains)
    errors = []
    for name, method in study.methods.items():
        if name == UNTRAINED:
            errors.append(f"methods.{name}: the name {UNTRAINED!r} is reserved for the base model; rename the method")
        errors += _method_params_errors(method, shape)
        errors += _control_errors(method, study.methods)
    return errors


# --- corpus, benchmarks, models, training ---------------------------------------------------------------------------

NOT_REGULAR = "is not a regular file (a device, a named pipe or a socket), which reading would not end or would block"


def _file_problem(path: Path) -> str | None:
    """Why a data file named in the config cannot be read, checked before anything opens it: a device such as
    /dev/zero reads forever and a named pipe blocks the dry run."""
    if not path.exists():
        return "does not exist"
    if not path.is_file() and not path.is_dir():
        return NOT_REGULAR
    if path.is_file() and path.stat().st_size == 0:
        return "is empty"
    if path.is_dir() and not any(path.iterdir()):
        return "is an empty directory"
    return None


def data_errors(study: Study, workdir: Path) -> list[str]:
    """The corpus sources and benchmarks must be in the registry, and the benchmarks cover the three domains."""
    errors = []
    for name in study.corpus.sources:
        if name not in REGISTRY:
            errors.append(f"corpus.sources: unknown source {name!r}{did_you_mean(name, REGISTRY)} "
                          f"(known: {_known(n for n, b in REGISTRY.items() if b.procedural)})")
        elif not REGISTRY[name].procedural:
            errors.append(f"corpus.sources: {name!r} is a real benchmark, not a procedural training source; remove it")
    names = study.benchmarks.names
    for name in names:
        if name not in REGISTRY:
            errors.append(f"benchmarks.names: unknown benchmark {name!r}{did_you_mean(name, REGISTRY)} "
                          f"(known: {_known(REGISTRY)})")
    domains = {REGISTRY[n].domain for n in names if n in REGISTRY}
    if len(domains) < 3:
        errors.append(f"benchmarks.names: the domain-balanced summary (DB-12) needs math, logic and science "
                      f"benchmarks; found only {sorted(domains)} — add benchmarks of the missing domain(s)")
    return errors + corpus_file_errors(study, workdir) + benchmark_file_errors(study, workdir)


def corpus_file_errors(study: Study, workdir: Path) -> list[str]:
    """A corpus file that is there must be a regular file (a missing one is Snakemake's missing input of rule
    `corpus`)."""
    return [f"corpus.files[{index}].path: {entry['path']!r} {NOT_REGULAR}; give the path of a JSONL or parquet file"
            for index, entry in enumerate(study.corpus.files)
            if _file_problem(workdir / entry["path"]) == NOT_REGULAR]


def _file_fix(problem: str, n_files: int) -> str:
    if problem != "does not exist":
        return "put the file there or fix the path"
    if n_files > 1:
        return ("put the file there or fix the path: a benchmark given as several files is read from all of them (or, "
                "with none of them there and `benchmarks.hub_fallback: true`, from the hub by name)")
    return "put the file there, fix the path, or set `benchmarks.hub_fallback: true` to load it from the hub by name"


def benchmark_file_errors(study: Study, workdir: Path) -> list[str]:
    """Each real benchmark's local file must exist and be non-empty — a missing one may come from the hub instead
    (`benchmarks.hub_fallback`); a records-only study reads none."""
    names = study.benchmarks.names
    reads_files = study.records_file is None
    errors = []
    files = study.benchmarks.files
    fallback = study.benchmarks.hub_fallback
    for name, entry in files.items():
        key = f"benchmarks.files.{name}"
        if name not in names:
            errors.append(f"{key}: {name!r} is not in benchmarks.names{did_you_mean(name, names)}; "
                          f"fix the name or remove the entry")
        elif name in REGISTRY and REGISTRY[name].procedural:
            errors.append(f"{key}: {name!r} is a procedural stand-in, generated rather than read; remove the entry")
        elif reads_files:
            problems = {path: _file_problem(workdir / path) for path in benchmark_paths(entry)}
            if fallback and all(problem == "does not exist" for problem in problems.values()):
                continue  # loaded from the hub by name in its benchmark_items job
            errors += [f"{key}: {path!r} {problem}; {_file_fix(problem, len(problems))}"
                       for path, problem in problems.items() if problem]
    for name in names:
        if name in REGISTRY and not REGISTRY[name].procedural and name not in files and not fallback and reads_files:
            errors.append(f"benchmarks.files.{name}: missing; real benchmark {name!r} is read from a local file — "
                          f"add `{name}: <path>` or set `benchmarks.hub_fallback: true`")
    return errors


def _readable_test_items(study: Study, workdir: Path) -> dict:
    """{benchmark: its items} of the study's benchmarks whose items can be built at dry run: the procedural ones and
    real ones whose files are on disk (a real benchmark read from the hub is not on disk at dry run)."""
    from dataflex_rl.corpus.build import benchmark_items

    items = {}
    for benchmark in study.benchmarks.names:
        path = study.benchmarks.files.get(benchmark)
        on_disk = path is not None and all((workdir / p).is_file() for p in benchmark_paths(path))
        if benchmark in REGISTRY and (REGISTRY[benchmark].procedural or on_disk):
            items[benchmark] = benchmark_items(benchmark, study.benchmarks.items, study.benchmarks.seed,
                                               [str(workdir / p) for p in benchmark_paths(path)] if on_disk else None)
    return items


def _overlap_error(key: str, overlaps: list, what: str, fix: str, threshold: float) -> list[str]:
    if not overlaps:
        return []
    row, benchmark, item, how = overlaps[0]
    first = (f"{row!r} = benchmark {benchmark!r} item {item!r}" if how in ("id", "exact")
             else f"{row!r} holds benchmark {benchmark!r} item {item!r} ({how})")
    return [f"{key}: {len(overlaps)} {what} are or hold test items (the same id, or a prompt decontamination "
            f"removes from the corpus: the same normalised text, or the item inside a template at "
            f"decontamination.threshold {threshold:g}), the first row {first}; {fix} — a validation prompt that is "
            "also scored measures the selection on its own target"]


def validation_source_errors(study: Study, workdir: Path) -> list[str]:
    """A prompt selection's own validation prompts (its `validation` option): a file (`_validation_file_errors`) or a
    benchmark (`_validation_benchmark_errors`). Either way no validation prompt may be or hold a test item of the
    study's benchmarks whose items a dry run can build: the same id, or a prompt the decontamination would remove from
    the corpus for it (the same normalised text, or the item inside a template)."""
    sources = {name: spec for name, spec in study.methods.items() if spec.validation_input()}
    if not sources or study.records_file:
        return []
    tests = _readable_test_items(study, workdir)
    errors = []
    for name, spec in sources.items():
        if spec.validation_benchmark():
            errors += _validation_benchmark_errors(study, name, spec, tests)
        else:
            errors += _validation_file_errors(study, name, spec, tests, workdir)
    return errors + _joint_split_errors(study, tests)


def _joint_split_errors(study: Study, tests: dict) -> list[str]:
    """The items the study holds out of a validation benchmark's test score are the union of the draws of every
    method trained with it (Study.benchmark_validation_draws): draws that each leave test items can still cover
    every item together, and the records of every run would have no test item of that benchmark to score."""
    from dataflex_rl.prompt_selection.benchmark_split import validation_positions

    trained = {run.method for run in study.runs}
    errors = []
    for benchmark in study.benchmarks.names:
        draws = study.benchmark_validation_draws(benchmark)
        if len(draws) < 2:
            continue
        count = len(tests[benchmark]) if benchmark in tests else study.benchmarks.items
        if any(size >= count for size, _ in draws):  # one draw alone leaves none: refused per method
            continue
        if len(validation_positions(benchmark, count, draws)) < count:
            continue
        methods = [name for name, spec in study.methods.items()
                   if name in trained and spec.validation_benchmark() == benchmark]
        named = ", ".join(f"methods.{name} (validation_size {params['validation_size']}, validation_seed "
                          f"{params['validation_seed']})"
                          for name in methods for params in [study.methods[name].resolved_params()])
        errors.append(f"methods.{methods[0]}.params.validation_seed: the validation draws of {named} from benchmark "
                      f"{benchmark!r} together hold out all {count} of its items (every run's test score leaves out "
                      f"the union of the study's draws), so no run has a test item of it to score; give these "
                      f"methods one validation_seed (their draws of one size are then the same items), lower their "
                      f"validation_size, or raise benchmarks.items")
    return errors


def _validation_benchmark_errors(study: Study, name: str, spec: MethodSpec, tests: dict) -> list[str]:
    """A validation benchmark (prompt_selection.benchmark_split) must be one of the study's, with test items left after
    `validation_size` are drawn; its drawn items are its own test score's no longer, and are checked against the
    other benchmarks' items."""
    import pandas as pd

    from dataflex_rl.prompt_selection.benchmark_split import validation_positions
    from dataflex_rl.prompt_selection.validation_file import overlaps_with_tests

    key, benchmark, params = f"methods.{name}.params.validation", spec.validation_benchmark(), spec.resolved_params()
    size, cap = params["validation_size"], study.benchmarks.items
    if benchmark not in study.benchmarks.names:
        return [f"{key}.benchmark: {benchmark!r} is not one of the study's benchmarks.names "
                f"{list(study.benchmarks.names)}; name one of them (its drawn items are held out of its test score)"]
    if size >= cap:
        return [f"methods.{name}.params.validation_size: {size} validation items of benchmark {benchmark!r} leave "
                f"none of its at most {cap} items (benchmarks.items) to test; lower it below {cap}"]
    others = [frame for other, frame in tests.items() if other != benchmark]
    if benchmark not in tests or not others:
        return []
    items = tests[benchmark]
    drawn = items.iloc[sorted(validation_positions(benchmark, len(items), [(size, params["validation_seed"])]))]
    threshold = study.decontamination.threshold
    return _overlap_error(key, overlaps_with_tests(drawn, pd.concat(others, ignore_index=True), threshold),
                          f"validation item(s) drawn from benchmark {benchmark!r}",
                          "use another validation benchmark or seed", threshold)


def _validation_file_errors(study: Study, name: str, spec: MethodSpec, tests: dict, workdir: Path) -> list[str]:
    """A validation file (prompt_selection.validation_file) must be a readable corpus file whose rows all pass the
    corpus checks and hold at least `validation_size` prompts, none of them a test item."""
    import pandas as pd

    from dataflex_rl.prompt_selection.validation_file import overlaps_with_tests, read_validation_file

    key, entry = f"methods.{name}.params.validation", spec.validation_file()
    size = spec.resolved_params()["validation_size"]
    if problem := _file_problem(workdir / entry["path"]):
        return [f"{key}.path: {entry['path']!r} {problem}; put the validation file there or fix the path"]
    try:
        rows = read_validation_file(entry, workdir)
    except ValueError as error:
        return [f"{key}: {error}"]
    errors = []
    if size > len(rows):
        errors.append(f"methods.{name}.params.validation_size: {size} exceeds the {len(rows)} prompts of validation "
                      f"file {entry['path']}; lower it to at most {len(rows)} ({len(rows)}: all of the file, as the "
                      "released loop scores against)")
    threshold = study.decontamination.threshold
    overlaps = overlaps_with_tests(rows, pd.concat(list(tests.values()), ignore_index=True), threshold) if tests else []
    return errors + _overlap_error(key, overlaps, f"prompt(s) of validation file {entry['path']}",
                                   "remove them from the file", threshold)


def model_errors(study: Study, workdir: Path) -> list[str]:
    """Each model the config declares, and the methods the study trains on it, checked by its backend
    (dataflex_rl.backends.base: `config_errors`)."""
    return [error for model, spec in study.declared_models.items()
            for error in get_backend(spec.backend).config_errors(f"models.{model}", spec, workdir,
                                                                 study.records_file is not None,
                                                                 study.methods_trained_on(model))]


def training_errors(study: Study) -> list[str]:
    """A checkpoint interval longer than the run (the default interval, like one left out, is not refused: a short
    run keeps it)."""
    steps, every = study.training.steps, study.training.checkpoint_every
    if every != GRPOSettings.checkpoint_every and every > steps:
        return [f"training.checkpoint_every: {every} > training.steps {steps}: the run would never "
                f"checkpoint, so a preempted or failed job restarts from step 0; set it ≤ {steps}"]
    return []


def _budgets(study: Study, model: str) -> tuple[tuple[str, int, str], ...]:
    """(the key it comes from, tokens, what it holds) of `model`'s response and answer lengths (its own or the
    study's: Study.model_training, model_evaluation)."""
    spec = study.declared_models[model]
    return ((spec.setting_key("training", "max_new_tokens"), study.model_training(model).max_new_tokens,
             "a response"),
            (spec.setting_key("evaluation", "max_new_tokens"), study.model_evaluation(model).max_new_tokens,
             "an answer"))


def _token_caps(study: Study, model: str) -> list[tuple]:
    """(cap key, configured value, what sits beside a text at the cap, its tokens, the text, its companion) of every
    token cap the config sets (dataflex_rl.corpus.token_caps), beside `model`'s lengths."""
    (response_key, response, _), (answer_key, answer, _) = _budgets(study, model)
    caps = (("corpus", "max_prompt_tokens", f"{response_key} {response}", response, "prompt", "its response"),
            ("benchmarks", "max_prompt_tokens", f"{answer_key} {answer}", answer, "prompt", "its answer"),
            ("corpus", "max_answer_tokens", "1 end-of-text token", 1, "gold answer", "its end-of-text token"),
            ("benchmarks", "max_answer_tokens", "1 end-of-text token", 1, "gold answer", "its end-of-text token"))
    return [(f"data_validation.{section}.{name}", configured, *rest) for section, name, *rest in caps
            if (configured := getattr(study.data_validation[section], name)) is not None]


def prompt_cap_errors(study: Study) -> list[str]:
    """A model that builds its shape must leave room for a prompt beside a response of training.max_new_tokens and an
    answer of evaluation.max_new_tokens, and a text at a configured token cap (dataflex_rl.corpus.token_caps) with what
    follows it must fit its positions."""
    errors = []
    for model, spec in study.declared_models.items():
        if spec.shape is None:
            continue
        key, positions = f"models.{model}.shape.max_position_embeddings", spec.shape["max_position_embeddings"]
        errors += [f"{budget}: {tokens} ≥ {key} {positions}: {what} of that length leaves no position for a prompt; "
                   f"lower {budget} or raise {key}" for budget, tokens, what in _budgets(study, model)
                   if tokens >= positions]
        for cap_key, configured, beside, tokens, text, companion in _token_caps(study, model):
            room = positions - tokens
            if 1 <= room < configured:
                errors.append(f"{cap_key}: {configured} + {beside} > {key} {positions}: a {text} at the cap and "
                              f"{companion} would run past the model's positions; set {cap_key} to at most {room} or "
                              f"raise {key}")
    return errors


def records_errors(study: Study, workdir: Path) -> list[str]:
    path = study.records_file
    if path is None:
        return []
    problem = _file_problem(workdir / path)
    if problem:
        return [f"records_file: {path!r} {problem} (relative to {str(workdir)!r}); fix the path"]
    damaged = parquet_problem(workdir / path) if path.endswith(".parquet") else None
    return [f"records_file: {damaged}; nothing in this workflow builds it: restore the file, or point records_file at "
            f"an intact copy"] if damaged else []


def variance_source_errors(study: Study, workdir: Path) -> list[str]:
    """`stats.variance_from` must name a readable file, except this study's own records before they are built (the
    power plan then says it has no source yet: dataflex_rl.study.power_plan)."""
    path = study.stats.variance_from
    if path is None or Path(path) == Path(RECORDS) and not (workdir / path).exists():
        return []
    problem = _file_problem(workdir / path)
    if problem:
        return [f"stats.variance_from: {path!r} {problem} (relative to {str(workdir)!r}); name the released run table, "
                f"a pilot study's records or this study's {RECORDS}, or remove the key"]
    damaged = parquet_problem(workdir / path) if path.endswith(".parquet") else None
    return [f"stats.variance_from: {damaged}; restore the file or name another records table"] if damaged else []


# --- the prompt template ---------------------------------------------------------------------------------------------

_SAMPLE_QUESTION = "What is 17 + 25?"
_LITERAL_BRACES = "use {{ and }} for a literal brace"


def _field_name(field: str) -> str:
    """The name a replacement field looks up: `question` of `{question[0]}` and `{question.x}`."""
    return re.match(r"[^.\[]*", field).group()


def _placeholder_problem(field: str) -> str | None:
    """Why `{field}` is not the one placeholder the pipeline fills (`{question}`, by name, the whole question)."""
    name = _field_name(field)
    if name == "question":
        return None if name == field else (f"{{{field}}} reads an attribute or item of the question, not the question; "
                                           f"write {{question}}")
    if name == "" or name.isdigit():
        return (f"positional placeholder {{{field}}}: the template is filled by name with the question only; write "
                f"{{question}}, or {_LITERAL_BRACES}")
    return (f"unknown placeholder {{{field}}}: only {{question}} is filled (the model writes the answer); remove it, "
            f"or {_LITERAL_BRACES}")


def template_errors(template: str) -> list[str]:
    """`prompt_template` parsed and rendered once against a sample question, with the renderer the jobs use."""
    try:
        fields = [field for _, field, _, _ in Formatter().parse(template) if field is not None]
    except ValueError as error:
        return [f"prompt_template: {template!r} is not a valid template ({error}): braces mark the {{question}} "
                f"placeholder — {_LITERAL_BRACES}"]
    problems = [problem for field in fields if (problem := _placeholder_problem(field))]
    if not any(_field_name(field) == "question" for field in fields):
        problems.append(f"{template!r} has no {{question}} placeholder ({{{{question}}}} is literal text), so no "
                        f"prompt would show its question; write {{question}} where the question goes")
    if not problems:
        try:
            render_prompt(_SAMPLE_QUESTION, template)
        except (ValueError, TypeError, KeyError) as error:
            problems = [f"{template!r} fails when rendered with a sample question ({type(error).__name__}: {error}); "
                        f"the question is text — write {{question}} without a format spec or conversion"]
    return [f"prompt_template: {problem}" for problem in problems]


def study_errors(study: Study, workdir: str | Path = ".") -> list[str]:
    """Every problem a schema cannot see, each naming the key, the bad value and the fix. Paths are resolved against
    `workdir` (the workflow's working directory)."""
    workdir = Path(workdir)
    return (method_errors(study) + data_errors(study, workdir) + model_errors(study, workdir)
            + training_errors(study) + prompt_cap_errors(study) + records_errors(study, workdir)
            + template_errors(study.template) + campaign_errors(study, workdir)
            + validation_source_errors(study, workdir) + variance_source_errors(study, workdir))


# --- resources ------------------------------------------------------------------------------------------------------

_LIMITS = (("gpu", "gpus_per_node", "GPUs"), ("cpus_per_task", "cpus_per_node", "CPUs"),
           ("mem_mb", "mem_mb_per_node", "MB of memory"), ("runtime", "max_runtime", "minutes"))


def corpus_size_errors(study: Study, workdir: Path) -> list[str]:
    prompts = study.training.prompts_per_step
    bound = corpus_rows_bound(study.corpus, workdir, prompts)
    if bound is None:
        return []
    rows, made_of = bound
    problem = repeated_draw_problem(
        prompts, rows, f"the training corpus's {rows} rows at most ({made_of}; before exact duplicates are dropped)",
        f"lower training.prompts_per_step to at most {rows}, or raise corpus.items_per_domain or add corpus.files")
    return [f"training.prompts_per_step: {problem}"] if problem else []


def _largest_selection_round(methods: Iterable[MethodSpec]) -> SelectionSize | None:
    """The most candidates and the most rollouts per prompt of these methods' prompt-selection rounds (catalogue
    defaults filled in; the memory estimate takes both at once), None without a prompt-selection method."""
    rounds = [method.resolved_params() for method in methods if method.family.role is Role.PROMPT_SELECTION]
    if not rounds:
        return None
    return SelectionSize(candidates=max(r["candidates_per_round"] for r in rounds),
                         rollouts=max(max(r["rollouts_candidate"], r["rollouts_validation"]) for r in rounds),
                         gradient_rows=max(_gradient_rows(r) for r in rounds))


def _gradient_rows(params: Mapping[str, Any]) -> int:
    """The per-group gradients a round of these options holds at once (prompt_selection.round): the M candidates'
    under a random projection, the |P_v| validation groups' when each is normalised before the sum; 0 otherwise."""
    rows = params["candidates_per_round"] if params.get("projection_dim") else 0
    return max(rows, params["validation_size"] if params.get("normalise_validation_groups") else 0)


# The resources that count something: each must be a whole number, however it was given (a profile's YAML, the
# command line's --set-resources, which passes text).
COUNTED_RESOURCES = {"threads": "threads", "cpus_per_task": "CPUs", "mem_mb": "megabytes", "gpu": "GPUs",
                     "runtime": "minutes", "nodes": "nodes"}


# The counted resources a job needs at least one of, and what becomes of a 0, which Snakemake lets through (it refuses
# only negative values): the Slurm executor sends each flag only for a value that is true.
AT_LEAST_ONE = {
    "runtime": "the Slurm executor sends no --time, so the job runs under the partition's default time limit, while "
               "the cost plan prices its jobs at 0 hours",
    "mem_mb": "the Slurm executor sends no --mem, so the job gets the partition's default memory, which no check "
              "here compares with what it needs",
    "cpus_per_task": "the Slurm executor reads a 0 as unset and asks for the job's threads instead "
                     "(--cpus-per-task=<threads>), so the job would not get what its resources say",
}


def resource_type_errors(resources: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A counted resource given as anything but a whole number (gpu=2.5, mem_mb=abc), or as 0 where a job needs at
    least one (runtime, mem_mb, cpus_per_task), named with the rule, before any check reads it as a number."""
    errors = []
    for rule, values in resources.items():
        for key, unit in COUNTED_RESOURCES.items():
            value = values.get(key)
            if value is None:
                continue
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0
                    or isinstance(value, str) and value.strip().isdigit()):
                errors.append(f"resources of rule {rule}: {key}={value!r} is not a whole number of {unit}; give a "
                              f"non-negative integer (e.g. --set-resources {rule}:{key}=<integer>, or in the profile)")
            elif key in AT_LEAST_ONE and int(value) == 0:
                errors.append(f"resources of rule {rule}: {key}={value!r}, but runtime, mem_mb and cpus_per_task "
                              f"must each be at least 1: {AT_LEAST_ONE[key]} — give {key} ≥ 1 (--set-resources "
                              f"{rule}:{key}=<integer>, or in the profile)")
    return errors


def planned_resource_errors(study: Study, resources: Mapping[str, Mapping[str, Any]],
                            workdir: str | Path = ".") -> list[str]:
    """The dry run's resource refusals for the rules that have jobs (`resource_errors`), and, where the study gives no
    `cluster.partitions` of its own, the jobs no node of the Slurm cluster `sinfo` answers for could run; none for a
    records-only study, which runs no job that asks for more than the defaults."""
    if study.records_file:
        return []
    return resource_errors(study, resources, workdir) + ([] if study.partitions else cluster_fit_errors(resources))


def resource_errors(study: Study, resources: Mapping[str, Mapping[str, Any]],
                    workdir: str | Path = ".") -> list[str]:
    """Problems with the resource requests of the rules that have jobs: `resources` maps a rule to its effective
    values (threads, gpu, cpus_per_task, mem_mb, runtime, slurm_partition, nodes; absent where unset), as Snakemake
    merged them from the rule, the profile's default-resources/set-resources/set-threads and the command line.

    - a counted resource that is not a whole number (`resource_type_errors`; the other checks need numbers);
    - a training batch larger than the corpus (`corpus_size_errors`; corpus files resolved against `workdir`);
    - what each model's backend requires of its train and score jobs (`train_resource_errors`,
      `score_resource_errors`; embedded: the estimated peak memory within `mem_mb`; verl: the responses of a step
      divide evenly over its GPUs);
    - a job asking for fewer CPUs than its threads;
    - with `cluster.partitions`: a job's partition must be one of them and its request within the partition's limits.
    """
    type_errors = resource_type_errors(resources)
    if type_errors:
        return type_errors
    errors = corpus_size_errors(study, Path(workdir)) if "train" in resources else []
    for model, spec in study.declared_models.items():
        backend = get_backend(spec.backend)
        training, evaluation = study.model_training(model), study.model_evaluation(model)
        if "train" in resources:
            cap = prompt_token_cap(f"models.{model}", spec.settings, training.max_new_tokens,
                                   study.data_validation["corpus"].max_prompt_tokens,
                                   spec.setting_key("training", "max_new_tokens"))
            selection = _largest_selection_round(study.methods_trained_on(model).values())
            errors += backend.train_resource_errors(f"models.{model}", spec, training, resources["train"], cap,
                                                    selection)
        if "score" in resources:
            errors += backend.score_resource_errors(f"models.{model}", spec, evaluation.batch_size,
                                                    evaluation.max_new_tokens, resources["score"])
    errors = list(dict.fromkeys(errors))  # a backend's check that reads no model entry says it once
    for rule, values in resources.items():
        threads, cpus = values.get("threads"), values.get("cpus_per_task")
        if threads and cpus and int(cpus) < int(threads):
            errors.append(f"resources of rule {rule}: cpus_per_task={cpus} < threads={threads} (threads_per_job or "
                          f"set-threads); the job would oversubscribe its CPUs — raise cpus_per_task or lower threads")
    partitions = study.partitions
    if not partitions:
        return errors
    for rule, values, partition in partition_requests(resources):
        if partition not in partitions:
            errors.append(f"resources of rule {rule}: slurm_partition={partition!r} is not in cluster.partitions"
                          f"{did_you_mean(partition, partitions)} (known: {_known(partitions)})")
            continue
        limits = partitions[partition]
        nodes = int(values.get("nodes") or 1)
        for resource, limit, unit in _LIMITS:
            request, cap = values.get(resource), getattr(limits, limit)
            if request is None or cap is None:
                continue
            per_job = nodes if resource == "gpu" else 1  # --gpus counts the job's GPUs over all its nodes
            if int(request) > cap * per_job:
                sized = (runtime_sizing(study, int(request), cap, Path(workdir)) if (rule, resource) == SIZED_RUNTIME
                         else "")
                errors.append(f"resources of rule {rule}: {resource}={request} exceeds cluster.partitions.{partition}."
                              f"{limit} = {cap} {unit}" + (f" × {nodes} nodes" if per_job > 1 else "") + sized
                              + "; lower the request (profile set-resources or --set-resources) or use another "
                                "partition")
    return errors
