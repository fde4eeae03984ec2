"""The policy catalogue: every data policy's name, family, signal, parameters (defaults, valid ranges, choices) and the
control it is compared against, and every family's record (`Family`) — plain data, no torch.

It is the one declaration of a policy: an implementation registers under its name and takes everything else from
here (registry.py refuses a name without an entry), the registry builds a policy from the parameters resolved and
checked here, and the study config is validated against the same entries at dry-run time without importing torch
(dataflex_rl.study.config_checks).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import Enum, StrEnum
from typing import Any, Callable, Mapping

from dataflex_rl.artefacts.layout import SELECTION_TABLES
from dataflex_rl.training.step_draws import repeated_draw_problem

PAPER = "paper"
RELEASED = "dataflex_released"
SEMANTICS = (PAPER, RELEASED)
NORMALIZE_MODES = ("batch_mean", "response_mean", "none")
ADVANTAGE_MODES = ("recompute", "keep")
CONTROLS = ("none", "random")
CONTROL_SCOPES = ("batch", "per_group")
TOPK_SCOPES = ("per_group", "global")
GFPO_METRICS = ("efficiency", "length")
TSCL_POLICIES = ("epsilon_greedy", "boltzmann")
PROBE_AGGREGATIONS = ("token_mean", "seq_mean")
SIMILARITIES = ("cosine", "dot")
PRECONDITIONERS = ("none", "adam")
RANDOM_SOURCES = ("chunk", "pool")


_AS_PAPER = object()  # `Param.released` when the released code ran the paper's default


@dataclass(frozen=True)
class Param:
    """One parameter: its default, type and valid values.

    default: the value under `semantics: paper` (None where the policy resolves it itself, e.g. from K);
    released: the default under `semantics: dataflex_released`, where the released code ran another one. A parameter
    with such a semantics-dependent default also accepts null, meaning "the semantics' default".
    kind: "int", "float", "str", "bool" or "mapping"; numbers lie in [low, high] (an open end excludes the bound);
    a string is one of `choices`; a mapping's refusal names its `shape`.
    """

    name: str
    kind: str
    default: Any = None
    released: Any = _AS_PAPER
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    shape: str = ""
    doc: str = ""
    recorded_unset: bool = True  # False: left out of a run's fingerprint while unset (MethodSpec.resolved_params)

    def valid_values(self) -> str:
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        if self.kind == "mapping" and self.shape:
            return f"a mapping: {self.shape}"
        if self.kind not in ("int", "float"):
            return {"mapping": "a mapping", "bool": "true or false"}.get(self.kind, f"a {self.kind}")
        left = "(-inf" if self.low is None else f"{'(' if self.low_open else '['}{self.low:g}"
        right = "inf)" if self.high is None else f"{self.high:g}{')' if self.high_open else ']'}"
        return f"{'an integer' if self.kind == 'int' else 'a number'} in {left}, {right}"

    def default_for(self, semantics: str) -> Any:
        return self.default if semantics == PAPER or self.released is _AS_PAPER else self.released

    def problem(self, value: Any) -> str | None:
        """Why `value` is not a valid setting of this parameter, or None."""
        if value is None:
            nullable = self.default is None or self.released is not _AS_PAPER
            return None if nullable else f"must be {self.valid_values()}, not null"
        if self.kind == "bool":
            ok = isinstance(value, bool)
        elif self.kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.kind == "float":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        elif self.kind == "str":
            ok = isinstance(value, str)
        else:
            ok = isinstance(value, Mapping)
        if not ok:
            return f"must be {self.valid_values()}"
        if self.choices and value not in self.choices:
            return f"must be {self.valid_values()}"
        if self.kind in ("int", "float"):
            below = self.low is not None and (value <= self.low if self.low_open else value < self.low)
            above = self.high is not None and (value >= self.high if self.high_open else value > self.high)
            if below or above:
                return f"must be {self.valid_values()}"
        return None


@dataclass(frozen=True)
class StudyShape:
    """What a policy's `joint` and `constraints` read: K rollouts, prompts per step and the corpus domains."""

    rollouts: int
    prompts_per_step: int
    domains: tuple[str, ...]


@dataclass(frozen=True)
class PolicySpec:
    """A catalogued policy. `controls`: the policies a method of this one may be compared against (empty: it is the
    reference and takes no control); `requires_control`: a method of it must name one.

    Checks across parameters, each given the resolved parameters (`resolve`) and returning (parameter, problem) pairs:
    `constraints_check(params, domains)`: without these the policy cannot be built — the registry runs them when it
    builds the policy (over a mixture's domains; none for a response policy), the dry-run check over the corpus's.
    `joint_check(params, shape)`: how the parameters fit the study's K and batch size — the policy runs with any
    (e.g. keep ≥ K keeps every response), but would select nothing; checked at dry-run only.
    """

    name: str
    family: Family
    signal: str | None
    params: tuple[Param, ...] = ()
    recompute_advantages: bool = False
    controls: tuple[str, ...] = ("baseline",)
    requires_control: bool = True
    constraints_check: Callable[[Mapping[str, Any], tuple[str, ...]], list[tuple[str, str]]] | None = None
    joint_check: Callable[[Mapping[str, Any], StudyShape], list[tuple[str, str]]] | None = None

    def __post_init__(self):
        if not isinstance(self.family, Family):
            raise TypeError(f"policy {self.name!r}: family {self.family!r} is not a Family; write Family.<name>, one "
                            f"of {', '.join(Family)} (docs/policies.md: adding a family)")

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def resolve(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Every parameter and option the policy accepts: its given value, or its default under the given `semantics`
        where unset or null."""
        semantics = params.get("semantics") or PAPER
        return {name: param.default_for(semantics) if params.get(name) is None else params[name]
                for name, param in self.accepted().items()}

    def constraints(self, params: Mapping[str, Any], domains: tuple[str, ...]) -> list[tuple[str, str]]:
        return self.constraints_check(self.resolve(params), domains) if self.constraints_check else []

    def joint(self, params: Mapping[str, Any], shape: StudyShape) -> list[tuple[str, str]]:
        return self.joint_check(self.resolve(params), shape) if self.joint_check else []

    @property
    def options(self) -> tuple[Param, ...]:
        return self.family.options

    def accepted(self) -> dict[str, Param]:
        """Every key a method's `params` may hold: the policy's own parameters and its family's options."""
        return {**{o.name: o for o in self.options}, **{p.name: p for p in self.params}}


_SEMANTICS = Param("semantics", "str", PAPER, choices=SEMANTICS,
                   doc="paper: each method as its paper defines it; dataflex_released: as the released code ran it")
_SELECTION_OPTIONS = (
    _SEMANTICS,
    Param("drop_kl", "bool", True, released=False, doc="a dropped response loses its KL term too"),
    Param("advantages", "str", choices=ADVANTAGE_MODES,
          doc="unset: recompute under paper where the entry sets recompute_advantages, else keep"),
    Param("control", "str", "none", choices=CONTROLS, doc="random: the matched-random control"),
    Param("control_scope", "str", "batch", choices=CONTROL_SCOPES, doc="only with control: random"),
    Param("seed", "int", 0, low=0, doc="the matched-random control's mask seed (only with control: random)"),
)
_REWEIGHTING_OPTIONS = (
    _SEMANTICS,
    Param("normalize", "str", "batch_mean", released=None, choices=NORMALIZE_MODES,
          doc="released (None): response_mean for per-response weights, batch_mean for token weights"),
)
# A prompt selection round every `steps_per_round` steps (docs/prompt_selection.md): the next M candidates of the
# seed's pool permutation, k_r rollouts each, the top ⌊M/q⌋ kept and trained on; |P_v| validation prompts with k_v
# rollouts each are held out of the pool. The responses of the kept prompts go through `response_policy`.
_PROMPT_SELECTION_OPTIONS = (
    Param("candidates_per_round", "int", 144, low=1, doc="M: the candidates scored per round"),
    Param("selection_ratio", "int", 6, low=1, doc="q: the round keeps ⌊M/q⌋ of its candidates"),
    Param("steps_per_round", "int", 10, low=1, doc="I: optimiser steps on the kept set before the next round"),
    Param("rollouts_candidate", "int", 8, low=2, doc="k_r: rollouts per candidate (2 at least: A = r − mean)"),
    Param("rollouts_validation", "int", 16, low=1, doc="k_v: rollouts per validation prompt"),
    Param("validation_size", "int", 32, low=1, doc="|P_v|: validation prompts held out of the pool"),
    Param("validation_seed", "int", 0, low=0, doc="draws the validation prompts, the same for every seed"),
    Param("validation", "mapping", None, recorded_unset=False,
          shape="a validation file as a corpus.files entry {path, domain, answer_format, source}, or a validation "
                "benchmark as {benchmark: <name>}",
          doc="the validation prompts' own source: a file, as a corpus.files entry {path, domain, answer_format, "
              "source}, or a benchmark {benchmark: <name>} whose drawn items are held out of its test score; unset: "
              "corpus rows (docs/prompt_selection.md)"),
    Param("score_temperature", "float", None, low=0.0, low_open=True,
          doc="sampling temperature of the scoring rollouts; unset: the training temperature"),
    Param("response_policy", "str", "baseline", doc="the response policy applied to the kept prompts' rollouts"),
    Param("response_params", "mapping", None, doc="its parameters"),
)


class Role(Enum):
    """What the policy of a family does in the policy driver (dataflex_rl/policies/driver.py), each step."""

    RESPONSE_POLICY = "weighs the responses of the prompts the prompt stream draws"
    MIXTURE = "steers the prompt stream's domain probabilities; the responses are kept as sampled"
    PROMPT_SELECTION = "chooses the prompts by a selection round every few steps; its response policy weighs them"


# What a response policy's implementation returns per step (`Family.output`).
MASK = "mask"  # 0/1 [G, K]: the responses the loss keeps
WEIGHTS = "weights"  # non-negative [G, K] or [G, K, L]: the PG term's weights


@dataclass(frozen=True)
class FamilyTraits:
    """What a family's policies share: the attributes of its `Family` member, documented there."""

    role: Role
    options: tuple[Param, ...] = ()
    module: str | None = None
    output: str | None = None
    needs_probe: bool = False
    matched_random_control: bool = False
    tables: tuple[str, ...] = ()


class Family(StrEnum):
    """A policy family: what every policy of it shares. The registry, the policy driver, the backends, the study and
    the rules read these attributes; nothing else tests a family. A member is its name (the string a train job, the
    plan and the messages write), and is named by it, so that `Family.selection.name == "selection"`.

    role: what its policy does in the policy driver;
    options: what every policy of the family accepts besides its own parameters (the registry consumes them; only
      `semantics` reaches an implementation that takes it);
    module: the module of dataflex_rl.policies whose implementations register its policies (None: none);
    output: what a response policy of it returns per step (MASK, WEIGHTS; None: nothing, every response at weight 1);
    needs_probe: a selection round scores its candidate prompts with the backend's probe (per-group policy gradients
      of validation and candidate prompts: dataflex_rl.prompt_selection.round.Probe); a backend without one refuses it;
    matched_random_control: a method may be compared with its own policy under `control: random`;
    tables: the study tables its runs add (names under results/tables/<study>/).
    """

    def __new__(cls, name: str, traits: FamilyTraits):
        family = str.__new__(cls, name)
        family._value_ = name
        for trait in fields(traits):
            setattr(family, trait.name, getattr(traits, trait.name))
        return family

    none = "none", FamilyTraits(Role.RESPONSE_POLICY, (_SEMANTICS,))
    selection = "selection", FamilyTraits(Role.RESPONSE_POLICY, _SELECTION_OPTIONS, module="selection", output=MASK,
                                          matched_random_control=True)
    reweighting = "reweighting", FamilyTraits(Role.RESPONSE_POLICY, _REWEIGHTING_OPTIONS, module="reweighting",
                                              output=WEIGHTS)
    mixture = "mixture", FamilyTraits(Role.MIXTURE, module="mixture")
    prompt_selection = "prompt_selection", FamilyTraits(Role.PROMPT_SELECTION, _PROMPT_SELECTION_OPTIONS,
                                                        module="prompt_selection", needs_probe=True,
                                                        tables=SELECTION_TABLES)


def rounded_count(fraction: float, total: int, semantics: str) -> int:
    """fraction·total rounded as the topk policy rounds it, before its floor of 1: Python's round() (halves to even)
    under dataflex_released, halves up under paper."""
    exact = fraction * total
    return int(round(exact) if semantics == RELEASED else math.floor(exact + 0.5))


def solve_rates(rollouts: int) -> list[float]:
    """Every solve rate q_g a group of K responses can have, as the policy computes it: mean of K float32 0/1 flags."""
    import numpy as np

    return [float(np.float32(j) / np.float32(rollouts)) for j in range(rollouts + 1)]


def _float32(value: float) -> float:
    import numpy as np

    return float(np.float32(value))


# The checks below read resolved parameters (`PolicySpec.resolve`): every parameter and option is present, at its
# default for the semantics where unset.

def _difffilter(params, shape):
    low, high = params["low"], params["high"]
    if low >= high:
        return [("low", f"low {low} ≥ high {high} keeps no group (the band low < q_g < high is empty); "
                        "set low < high")]
    lo, hi = _float32(low), _float32(high)
    kept = [q for q in solve_rates(shape.rollouts) if lo < q < hi]
    if not kept:
        rates = ", ".join(f"{j}/{shape.rollouts}" for j in range(shape.rollouts + 1))
        return [("low", f"no solve rate a group of K={shape.rollouts} rollouts can have ({rates}) lies strictly "
                        f"inside ({low}, {high}), so every group is dropped at every step; widen the band")]
    return []


def _keep_below_k(policy: str):
    def check(params, shape):
        keep = params["keep"]
        if keep is not None and keep >= shape.rollouts:
            return [("keep", f"keep {keep} ≥ K={shape.rollouts} (training.rollouts) keeps every response of a group, "
                             f"so {policy} selects nothing; set keep < {shape.rollouts}")]
        return []

    return check


def _topk(params, shape):
    semantics, fraction, scope = params["semantics"], params["fraction"], params["scope"]
    total = shape.rollouts if scope == "per_group" else shape.rollouts * shape.prompts_per_step
    over = (f"K={shape.rollouts} responses of each group" if scope == "per_group" else
            f"the batch's {shape.prompts_per_step}×{shape.rollouts}={total} responses")
    count = rounded_count(fraction, total, semantics)
    if count == 0:
        return [("fraction", f"fraction {fraction} of {over} rounds to 0 responses (scope {scope}); the policy would "
                             f"silently keep 1 instead — use a fraction ≥ {0.5 / total:.3g}")]
    return []


def _diffband(params, domains):
    low, high = params["low_q"], params["high_q"]
    return [("low_q", f"low_q {low} > high_q {high}; set low_q ≤ high_q")] if low > high else []


def _floor_times_domains(key: str):
    def check(params, domains):
        value = params[key]
        if value * len(domains) > 1:
            return [(key, f"{key} {value} × {len(domains)} domains = {value * len(domains):g} > 1: "
                          f"the floors alone exceed probability 1; use {key} ≤ {1 / len(domains):.4g}")]
        return []

    return check


def _static(params, domains):
    weights = params["weights"]
    if weights is None:
        return []
    problems = []
    unknown = sorted(set(weights) - set(domains))
    missing = sorted(set(domains) - set(weights))
    if unknown:
        problems.append(("weights", f"domain(s) {unknown} are not in the corpus, whose domains are "
                                    f"{list(domains)} (from corpus.sources)"))
    if missing:
        problems.append(("weights", f"missing weight(s) for corpus domain(s) {missing}; the weights must name exactly "
                                    f"the domains {list(domains)}"))
    values = list(weights.values())
    if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0
               for w in values) or not any(w > 0 for w in values if isinstance(w, (int, float))):
        problems.append(("weights", f"weights {dict(weights)} must be finite, non-negative and not all zero"))
    return problems


def _tscl(params, domains):
    window = params["window"]
    if params["semantics"] == PAPER and window < 2:
        return [("window", f"window {window} < 2: paper tscl fits a slope through the last `window` records; use ≥ 2")]
    return _floor_times_domains("floor")(params, domains)


def _kept_set_problem(params, prompts_per_step: int, keep: int) -> str | None:
    """A round's kept set smaller than a step's prompts: each step of the round draws a kept prompt more than once."""
    candidates, ratio, steps = params["candidates_per_round"], params["selection_ratio"], params["steps_per_round"]
    fixes = [f"use selection_ratio ≤ {candidates // prompts_per_step}"] if candidates >= prompts_per_step else []
    fixes += [f"raise candidates_per_round to at least {ratio * prompts_per_step}",
              f"lower training.prompts_per_step to at most {keep}"]
    problem = repeated_draw_problem(
        prompts_per_step, keep, f"the {keep} prompt(s) a round keeps (⌊M/q⌋ = ⌊{candidates}/{ratio}⌋; its {steps} steps "
                          f"would make {steps * prompts_per_step / keep:g} passes over them)",
        ", or ".join(fixes))
    return f"training.prompts_per_step {problem}" if problem else None


VALIDATION_FILE_KEYS = ("path", "domain", "answer_format", "source")  # a corpus.files entry's keys


def _validation_source_problem(entry: Mapping[str, Any]) -> str | None:
    """Why a prompt selection's `validation` option is neither a corpus-file entry (prompt_selection.validation_file)
    nor a benchmark entry {benchmark: <name>} (prompt_selection.benchmark_split), or None."""
    if "benchmark" in entry:
        if set(entry) != {"benchmark"} or not isinstance(entry["benchmark"], str) or not entry["benchmark"]:
            return ("a validation benchmark is given as {benchmark: <name>} alone, the name one of the study's "
                    f"benchmarks.names; got {dict(entry)!r}")
        return None
    unknown = sorted(set(entry) - set(VALIDATION_FILE_KEYS))
    if unknown:
        return (f"unknown key(s) {unknown}; a validation file is given as a corpus.files entry "
                f"{{{', '.join(VALIDATION_FILE_KEYS)}}}, a validation benchmark as {{benchmark: <name>}}")
    if not isinstance(entry.get("path"), str) or not entry["path"]:
        return "needs `path`: the JSONL or parquet file of validation prompts, in the corpus row format"
    return None


def _prompt_selection(params, shape):
    """The round must keep at least one prompt, and at least a step's prompts (the corpus's rule, step_draws); a
    validation probe needs more rollouts per validation prompt than per candidate (k_v > k_r, the paper's §4.3); the
    response policy must be a response policy with valid parameters."""
    problems = []
    if params["validation"] is not None and (problem := _validation_source_problem(params["validation"])):
        problems.append(("validation", problem))
    keep = params["candidates_per_round"] // params["selection_ratio"]
    if keep == 0:
        problems.append(("selection_ratio", f"⌊M/q⌋ = ⌊{params['candidates_per_round']}/{params['selection_ratio']}⌋ "
                                            "= 0 keeps no prompt; use selection_ratio ≤ candidates_per_round"))
    elif kept_set := _kept_set_problem(params, shape.prompts_per_step, keep):
        problems.append(("selection_ratio", kept_set))
    name = params["response_policy"]
    spec = CATALOGUE.get(name)
    if spec is None or spec.family.role is not Role.RESPONSE_POLICY:
        known = ", ".join(n for n, s in CATALOGUE.items() if s.family.role is Role.RESPONSE_POLICY)
        problems.append(("response_policy", f"{name!r} is not a response policy; use one of {known}"))
        return problems
    response_params = params["response_params"] or {}
    accepted = spec.accepted()
    for key, value in response_params.items():
        problem = f"unknown for policy {name!r}" if key not in accepted else accepted[key].problem(value)
        if problem:
            problems.append(("response_params", f"{key} {value!r}: {problem}"))
    if not problems:
        problems += [("response_params", f"{key}: {problem}") for key, problem in
                     spec.constraints(response_params, shape.domains) + spec.joint(response_params, shape)]
    return problems


# The prompt-selection policies whose rounds read validation prompts: the probe's validation gradient, or the
# validation set trained on (`validation_set`). The others take no `validation` source.
READS_VALIDATION = ("gradalign", "simacc", "validation_set")


def _reads_no_validation(policy: str, how: str):
    """The joint check of a prompt selection whose rounds read no validation prompts (`how` it ranks them): besides
    the round's checks, a `validation` source is refused — a benchmark's drawn items would only be held out of every
    run's test score, a file only be an input of its train jobs."""
    def check(params, shape):
        problems = _prompt_selection(params, shape)
        source = params["validation"]
        if source is not None and not _validation_source_problem(source):
            effect = (f"would only hold the items drawn from benchmark {source['benchmark']!r} out of every run's "
                      "test score" if "benchmark" in source else "would only be an input of its train jobs")
            problems.append(("validation", f"policy {policy!r} reads no validation prompts ({how}), so "
                                           f"{dict(source)!r} {effect}; remove validation (the policies that read "
                                           f"validation prompts: {', '.join(READS_VALIDATION)})"))
        return problems

    return check


def _validation_probe(params, shape):
    problems = _prompt_selection(params, shape)
    if params["rollouts_validation"] <= params["rollouts_candidate"]:
        problems.append(("rollouts_validation", f"k_v {params['rollouts_validation']} ≤ k_r "
                                                f"{params['rollouts_candidate']}: the validation gradient should be the "
                                                "less noisy side (k_v > k_r); raise rollouts_validation"))
    return problems


def _gradalign(params, shape):
    """Besides the validation probe's checks: `similarity: dot` with `normalise_validation_groups` is refused. The
    released scorer skips the per-group normalisation in dot mode (g_v is the plain sum), so the option would be
    silently ignored; refusing says so instead of running a combination that means nothing."""
    problems = _validation_probe(params, shape)
    if params["similarity"] == "dot" and params["normalise_validation_groups"]:
        problems.append(("normalise_validation_groups",
                         "true has no effect with similarity: dot (the released scorer sums the validation groups "
                         "unnormalised in dot mode); drop normalise_validation_groups, or use similarity: cosine"))
    return problems


_UNIT = dict(low=0.0, high=1.0)
# The gradient probe's parameters, and those of a probe against held-out validation prompts.
_PROBE = (
    Param("aggregation", "str", "token_mean", choices=PROBE_AGGREGATIONS, doc="the probe loss over a group's tokens"),
    Param("projection_dim", "int", 0, low=0, doc="a random projection of the gradients to this size; 0: exact"),
)
_VALIDATION_PROBE = (
    Param("precondition", "str", "none", choices=PRECONDITIONERS, doc="adam: g_v / (sqrt(v̂) + 1e-8)"),
    Param("normalise_validation_groups", "bool", False, doc="normalise each validation group before the sum"),
)
_PROBE_CONTROLS = ("baseline", "random_prompts")
_POSITIVE = dict(low=0.0, low_open=True)
_NON_NEGATIVE = dict(low=0.0)

CATALOGUE: dict[str, PolicySpec] = {spec.name: spec for spec in (
    PolicySpec("baseline", Family.none, None, controls=(), requires_control=False),
    PolicySpec("difffilter", Family.selection, "solve_rate", (
        Param("low", "float", 0.2, **_UNIT, doc="keep a group iff low < q_g"),
        Param("high", "float", 0.8, **_UNIT, doc="and q_g < high"),
    ), joint_check=_difffilter),
    PolicySpec("maxvar", Family.selection, "reward", (
        Param("keep", "int", None, low=1, doc="responses kept per group; paper 3 of K=5, released round(0.5·K)"),
    ), recompute_advantages=True, joint_check=_keep_below_k("maxvar")),
    PolicySpec("gfpo", Family.selection, "efficiency", (
        Param("keep", "int", 3, low=1, doc="responses kept per group"),
        Param("metric", "str", "efficiency", choices=GFPO_METRICS),
    ), recompute_advantages=True, joint_check=_keep_below_k("gfpo")),
    PolicySpec("topk", Family.selection, "mean_abs_advantage", (
        Param("fraction", "float", 0.5, low=0.0, high=1.0, low_open=True, doc="share of responses kept"),
        Param("scope", "str", "per_group", released="global", choices=TOPK_SCOPES),
    ), joint_check=_topk),
    PolicySpec("ar", Family.reweighting, "token_prob", (
        Param("alpha", "float", 0.5, **_UNIT, doc="w = α·π + (1 − α)"),
    )),
    PolicySpec("per", Family.reweighting, "mean_abs_advantage", (
        Param("exponent", "float", 0.5, **_NON_NEGATIVE),
        Param("eps", "float", 1e-8, **_NON_NEGATIVE),
    )),
    PolicySpec("softmax", Family.reweighting, "mean_abs_advantage", (
        Param("temperature", "float", 1.0, **_POSITIVE),
    )),
    PolicySpec("diffband", Family.reweighting, "reward", (
        Param("low_q", "float", 0.25, **_UNIT),
        Param("high_q", "float", 0.75, **_UNIT),
        Param("focus_weight", "float", 2.0, **_NON_NEGATIVE),
    ), constraints_check=_diffband),
    # The mixers' control; compared itself with uniform GRPO where the study has a baseline.
    PolicySpec("static", Family.mixture, None, (
        Param("weights", "mapping", None, doc="one non-negative weight per corpus domain; uniform if unset"),
    ), requires_control=False, constraints_check=_static),
    PolicySpec("reward_gap", Family.mixture, "domain_mean_reward", (
        Param("decay", "float", 0.9, low=0.0, high=1.0, high_open=True),
        Param("temperature", "float", 0.1, **_POSITIVE),
        Param("min_prob", "float", 0.05, **_NON_NEGATIVE),
    ), controls=("static",), constraints_check=_floor_times_domains("min_prob")),
    PolicySpec("dump_ucb", Family.mixture, "mean_abs_advantage", (
        Param("window", "int", 300, released=50, low=1, doc="responses"),
        Param("c", "float", 1.0, **_NON_NEGATIVE),
        Param("temperature", "float", 0.1, released=1.0, **_POSITIVE),
        Param("floor", "float", 0.0, released=0.05, **_NON_NEGATIVE),
        _SEMANTICS,
    ), controls=("static",), constraints_check=_floor_times_domains("floor")),
    PolicySpec("tscl", Family.mixture, "domain_mean_reward", (
        Param("window", "int", 10, released=50, low=1, doc="steps (paper, at least 2) or responses (released)"),
        Param("policy", "str", "epsilon_greedy", choices=TSCL_POLICIES),
        Param("epsilon", "float", 0.1, **_UNIT),
        Param("temperature", "float", 4e-4, released=1.0, **_POSITIVE),
        Param("absolute", "bool", True),
        Param("initial_progress", "float", 1.0),
        Param("floor", "float", 0.0, released=0.05, **_NON_NEGATIVE),
        _SEMANTICS,
    ), controls=("static",), constraints_check=_tscl),
    # Prompt selection by a validation probe (GradAlign) and its baselines: `signal` is what a round measures for it.
    PolicySpec("gradalign", Family.prompt_selection, "validation_gradient", (
        *_PROBE, Param("similarity", "str", "cosine", choices=SIMILARITIES, doc="dot: the candidate unnormalised"),
        *_VALIDATION_PROBE,
    ), controls=_PROBE_CONTROLS, joint_check=_gradalign),
    PolicySpec("simacc", Family.prompt_selection, "validation_gradient", (*_PROBE, *_VALIDATION_PROBE),
               controls=_PROBE_CONTROLS, joint_check=_validation_probe),
    PolicySpec("align", Family.prompt_selection, "candidate_gradient", _PROBE, controls=_PROBE_CONTROLS,
               joint_check=_reads_no_validation(
                   "align", "it scores the candidates against this round's candidates")),
    PolicySpec("accgreedy", Family.prompt_selection, "pass_rate", controls=_PROBE_CONTROLS,
               joint_check=_reads_no_validation(
                   "accgreedy", "it ranks the candidates by their own pass rates")),
    PolicySpec("random_prompts", Family.prompt_selection, None, (
        Param("draw_from", "str", "chunk", choices=RANDOM_SOURCES, doc="pool: the whole pool, as released"),
    ), joint_check=_reads_no_validation("random_prompts", "it draws its prompts at random")),
    PolicySpec("validation_set", Family.prompt_selection, None, controls=_PROBE_CONTROLS,
               joint_check=_prompt_selection),
)}

