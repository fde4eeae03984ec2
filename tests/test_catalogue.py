"""The torch-free policy catalogue: it agrees with the torch registry, computes what the policies compute, and the
config checks built on it accept the valid and refuse the invalid."""
import copy
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from dataflex_rl.study.config_checks import method_errors, resource_errors, shape_errors, study_errors, training_errors
from dataflex_rl.policies import build_mixture, build_response_policy, list_policies, registry
from dataflex_rl.policies.batch import GroupBatch
from dataflex_rl.policies.catalogue import CATALOGUE, Family, Param, PolicySpec, rounded_count, solve_rates
from dataflex_rl.policies.selection import _count, difficulty_band
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.study.resolved import Study

REPO = Path(__file__).resolve().parents[1]
SMOKE = yaml.safe_load((REPO / "config/smoke.yaml").read_text())


def test_catalogue_and_registry_agree_every_entry_has_exactly_one_implementation():
    registered = {name: (family, signal) for name, family, signal in list_policies()}
    assert registered == {name: (spec.family, spec.signal) for name, spec in CATALOGUE.items()}
    assert registry.unimplemented() == []
    for name, spec in CATALOGUE.items():
        entry = registry._REGISTRY[name]
        assert entry.spec is spec
        if entry.target is None:  # baseline: no function, no parameters
            assert spec.params == ()
            continue
        declared = list(inspect.signature(entry.target).parameters.values())[1:]
        assert {p.name for p in declared} - {"semantics"} == {p.name for p in spec.params} - {"semantics"}, name
        assert all(p.default is inspect.Parameter.empty for p in declared), name  # defaults: the catalogue's only
        with pytest.raises(ValueError, match=f"{name!r} is already registered"):
            registry.policy(name)(entry.target)
    assert {family.name: tuple(o.name for o in family.options) for family in Family if family.options} == {
        "none": ("semantics",),
        "selection": ("semantics", "drop_kl", "advantages", "control", "control_scope", "seed"),
        "reweighting": ("semantics", "normalize"),
        "prompt_selection": ("candidates_per_round", "selection_ratio", "steps_per_round", "rollouts_candidate",
                             "rollouts_validation", "validation_size", "validation_seed", "validation",
                             "score_temperature", "response_policy", "response_params")}


def test_a_catalogue_entry_without_an_implementation_is_refused(monkeypatch):
    import dataflex_rl.policies

    monkeypatch.setitem(CATALOGUE, "orphan", PolicySpec("orphan", Family.selection, "reward"))
    assert registry.unimplemented() == ["orphan"]
    with pytest.raises(ImportError, match=r"\['orphan'\] have no implementation: register one .* @policy\(name\)"):
        dataflex_rl.policies.__getattr__("LossWeights")


def test_registry_refuses_a_registration_that_disagrees_with_the_catalogue():
    original = registry._REGISTRY.pop("softmax")
    try:
        def typo(batch, temprature: float = 1.0):
            return batch.rewards

        def restated(batch, temperature: float = 1.0):
            return batch.rewards

        with pytest.raises(ValueError, match=r"softmax.*catalogue.*\['temprature'\].*\['temperature'\]"):
            registry.policy("softmax")(typo)
        with pytest.raises(ValueError, match=r"\['temperature'\] restate a default; defaults live in the catalogue"):
            registry.policy("softmax")(restated)
        with pytest.raises(ValueError, match="a reweighting policy is implemented by a function"):
            registry.policy("softmax")(type("Softmax", (), {"__init__": lambda self, domains, temperature: None}))
        assert "softmax" not in registry._REGISTRY
    finally:
        registry._REGISTRY["softmax"] = original


def test_a_policy_without_a_catalogue_entry_is_refused_naming_the_fix():
    def uncatalogued(batch, keep):
        return batch.rewards

    with pytest.raises(ValueError, match=r"'not_catalogued' has no catalogue entry: add PolicySpec\('not_catalogued', "
                                         r"\.\.\.\) to CATALOGUE in dataflex_rl/policies/catalogue\.py"):
        registry.policy("not_catalogued")(uncatalogued)
    assert "not_catalogued" not in registry._REGISTRY


def test_defaults_resolve_under_the_semantics_and_reach_the_implementation():
    # DUMP's constants (window 300 responses, T = 0.1, no floor) and the released code's (50, 1, 0.05).
    dump_ucb = CATALOGUE["dump_ucb"]
    assert dump_ucb.resolve({}) == {"window": 300, "c": 1.0, "temperature": 0.1, "floor": 0.0, "semantics": "paper"}
    released = dump_ucb.resolve({"semantics": "dataflex_released", "c": 2.0, "floor": None})
    assert released == {"window": 50, "c": 2.0, "temperature": 1.0, "floor": 0.05, "semantics": "dataflex_released"}
    mixer = build_mixture("dump_ucb", ["logic", "math"], {"semantics": "dataflex_released", "c": 2.0})
    assert (mixer.window, mixer.c, mixer.temperature, mixer.floor) == (50, 2.0, 1.0, 0.05)
    assert build_response_policy("topk", {"semantics": "dataflex_released"}).params == {
        "fraction": 0.5, "scope": "global", "semantics": "dataflex_released"}
    assert build_response_policy("maxvar", {}).params == {"keep": None, "semantics": "paper"}  # resolved from K


def test_the_registry_checks_ranges_and_constraints_from_the_catalogue():
    with pytest.raises(ValueError, match=r"policy 'gfpo': keep 0 must be an integer in \[1, inf\)"):
        build_response_policy("gfpo", {"keep": 0})
    with pytest.raises(ValueError, match=r"policy 'diffband': low_q: low_q 0.9 > high_q 0.1"):
        build_response_policy("diffband", {"low_q": 0.9, "high_q": 0.1})
    with pytest.raises(ValueError, match=r"min_prob 0.6 × 2 domains = 1.2 > 1"):
        build_mixture("reward_gap", ["logic", "math"], {"min_prob": 0.6})
    build_mixture("reward_gap", ["logic", "math"], {"min_prob": 0.5})  # 0.5 × 2 = 1: every domain at its floor


def test_the_modules_a_dry_run_imports_do_not_import_torch_pandas_or_scipy():
    """Every module the Snakefile and the rule files import at parse time (and the provenance the scripts record),
    read from their import lines: none may load torch (seconds on every dry run), scipy (a second on every job's parse
    of the Snakefile; the power plan imports it where it prints) or pandas (Snakemake loads it today, but a tool
    reading the plan without Snakemake need not)."""
    sources = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    modules = {match for path in sources
               for match in re.findall(r"^\s*from (dataflex_rl[\w.]*) import", path.read_text(), flags=re.M)}
    assert {"dataflex_rl.study.resolved", "dataflex_rl.study.config_checks", "dataflex_rl.study.plan"} <= modules
    code = (f"import sys, dataflex_rl.artefacts.provenance, {', '.join(sorted(modules))}; "
            "print(sorted({'torch', 'pandas', 'scipy'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_rounded_count_and_the_topk_count_by_hand():
    # halves: 0.5·5 = 2.5 → 3 (paper, half up) or 2 (released, half to even); 0.1·5 = 0.5 → 1 or 0
    assert (rounded_count(0.5, 5, "paper"), rounded_count(0.5, 5, "dataflex_released")) == (3, 2)
    assert (rounded_count(0.1, 5, "paper"), rounded_count(0.1, 5, "dataflex_released")) == (1, 0)
    assert (rounded_count(0.75, 10, "paper"), rounded_count(0.75, 10, "dataflex_released")) == (8, 8)  # 7.5
    assert (rounded_count(0.25, 10, "paper"), rounded_count(0.25, 10, "dataflex_released")) == (3, 2)  # 2.5
    # topk keeps at least one response and at most all of them
    assert (_count(0.1, 5, "dataflex_released"), _count(1.0, 5, "paper"), _count(0.5, 5, "paper")) == (1, 5, 3)


def _solved_batch(rollouts: int) -> GroupBatch:
    """Group j has j of K responses solved (j = 0..K)."""
    rewards = torch.tensor([[1.0 if k < j else 0.0 for k in range(rollouts)] for j in range(rollouts + 1)])
    mask = torch.ones(*rewards.shape, 2)
    return GroupBatch(rewards=rewards, lengths=torch.full_like(rewards, 2.0), token_mask=mask,
                      advantages=torch.zeros_like(mask), old_logprobs=torch.zeros_like(mask),
                      domains=("math",) * (rollouts + 1), prompt_ids=tuple(map(str, range(rollouts + 1))))


@pytest.mark.parametrize("rollouts", [2, 3, 5, 7, 8])
def test_difffilter_band_check_predicts_the_policy_exactly(rollouts):
    batch = _solved_batch(rollouts)
    for low, high in [(0.2, 0.8), (0.2, 0.4), (0.4, 0.6), (1 / 3, 2 / 3), (0.0, 1.0), (0.25, 0.5), (0.6, 0.61)]:
        kept_by_policy = difficulty_band(batch, low, high)[:, 0].bool().tolist()
        assert solve_rates(rollouts) == batch.solve_rate().tolist()
        problems = CATALOGUE["difffilter"].joint({"low": low, "high": high},
                                                  _shape(rollouts=rollouts))
        assert (problems == []) == any(kept_by_policy), (rollouts, low, high)


def _shape(rollouts=5, prompts_per_step=4, domains=("logic", "math", "science")):
    from dataflex_rl.policies.catalogue import StudyShape

    return StudyShape(rollouts, prompts_per_step, domains)


def test_param_ranges_and_types():
    fraction = CATALOGUE["topk"].param("fraction")
    assert fraction.problem(1.0) is None and fraction.problem(0.25) is None
    assert fraction.problem(0.0) == "must be a number in (0, 1]"
    assert fraction.problem("half") == "must be a number in (0, 1]"
    keep = CATALOGUE["gfpo"].param("keep")
    assert keep.problem(3) is None and keep.problem(True) is not None and keep.problem(2.5) is not None
    assert CATALOGUE["tscl"].param("policy").problem("greedy") == "must be one of epsilon_greedy, boltzmann"
    assert Param("decay", "float", 0.9, low=0.0, high=1.0, high_open=True).problem(1.0) == \
        "must be a number in [0, 1)"
    assert CATALOGUE["maxvar"].param("keep").problem(None) is None  # None: resolved from semantics and K


def test_topk_zero_count_depends_on_semantics_and_scope():
    topk = CATALOGUE["topk"].joint
    assert topk({"fraction": 0.1}, _shape()) == []                    # paper: 0.5 rounds up to 1 of 5
    assert topk({"fraction": 0.1, "semantics": "dataflex_released", "scope": "per_group"}, _shape())  # round(0.5) = 0
    assert topk({"fraction": 0.1, "semantics": "dataflex_released"}, _shape()) == []  # global: 0.1·20 = 2


def _config(**methods):
    config = copy.deepcopy(SMOKE)
    config["methods"].update(methods)
    return config


def test_valid_configs_pass_and_a_matched_random_control_is_a_valid_control(tmp_path):
    assert study_errors(Study.from_config(SMOKE), REPO) == []
    for name in ("config.yaml", "policies.yaml"):
        overlay = yaml.safe_load((REPO / "config" / name).read_text())
        assert method_errors(Study.from_config(_config(**overlay["methods"]))) == []
    config = _config(topk_random={"policy": "topk", "params": {"control": "random", "seed": 3},
                                  "control": "baseline"},
                     topk={"policy": "topk", "control": "topk_random"},
                     static={"policy": "static", "params": {"weights": {"math": 2, "logic": 1, "science": 1}}})
    assert method_errors(Study.from_config(config)) == []
    config["methods"]["topk"]["control"] = "softmax"
    assert method_errors(Study.from_config(config)) == [
        "methods.topk.control: 'softmax' runs policy 'softmax'; a selection method (topk) is compared with a method "
        "whose policy is baseline (or its own matched-random control) (DESIGN.md: baseline, or static for mixtures) "
        "— change the control"]


def test_hub_fallback_allows_a_missing_file_but_never_an_empty_one(tmp_path):
    config = copy.deepcopy(SMOKE)
    names = config["benchmarks"]["names"]
    names[names.index("kinematics")] = "GPQA-Diamond"
    config["benchmarks"]["files"] = {"GPQA-Diamond": "gpqa.jsonl"}
    assert study_errors(Study.from_config(config), tmp_path) == [
        "benchmarks.files.GPQA-Diamond: 'gpqa.jsonl' does not exist; put the file there, fix the path, or set "
        "`benchmarks.hub_fallback: true` to load it from the hub by name"]
    config["benchmarks"]["hub_fallback"] = True
    assert study_errors(Study.from_config(config), tmp_path) == []
    (tmp_path / "gpqa.jsonl").write_text("")
    assert study_errors(Study.from_config(config), tmp_path) == [
        "benchmarks.files.GPQA-Diamond: 'gpqa.jsonl' is empty; put the file there or fix the path"]
    (tmp_path / "gpqa.jsonl").write_text('{"question": "q", "answer": "A"}\n')
    config["benchmarks"]["hub_fallback"] = False
    assert study_errors(Study.from_config(config), tmp_path) == []


def test_a_checkpoint_interval_past_the_last_step_is_refused_unless_it_is_the_default():
    """Writing the default interval out is leaving it out: a short run keeps it (it checkpoints at its end)."""
    config = copy.deepcopy(SMOKE)
    assert config["training"]["steps"] < GRPOSettings.checkpoint_every
    assert training_errors(Study.from_config(config)) == []
    config["training"]["checkpoint_every"] = GRPOSettings.checkpoint_every
    assert training_errors(Study.from_config(config)) == []
    config["training"]["checkpoint_every"] = 10
    assert training_errors(Study.from_config(config)) == [
        f"training.checkpoint_every: 10 > training.steps {config['training']['steps']}: the run would never "
        f"checkpoint, so a preempted or failed job restarts from step 0; set it ≤ {config['training']['steps']}"]


def test_unknown_policies_and_transforms_are_refused_before_the_study_is_resolved():
    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text())
    config = _config(typo={"policy": "topkk"})
    config["regimes"] = {"noisy": {"transform": "label_nosie", "fraction": 0.2}}
    assert shape_errors(config, schema) == [
        f"methods.typo.policy: unknown policy 'topkk'; did you mean 'topk'? (known: {', '.join(sorted(CATALOGUE))})",
        "regimes.noisy: unknown transform 'label_nosie'; did you mean 'label_noise'? (known: label_noise, subset, "
        "noisy_rewards, unbalanced, low_utility)"]
    assert shape_errors(SMOKE, schema) == []


def test_resource_errors_for_verl_batches_cpus_and_partitions():
    config = copy.deepcopy(SMOKE)
    config["models"] = {"qwen": {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}}
    config["training"]["rollouts"] = 5
    config["training"]["prompts_per_step"] = 50  # 250 responses: divisible by 5 and 10 GPUs, not by 8
    assert resource_errors(Study.from_config(config), {"train": {"gpu": 10, "threads": 8, "cpus_per_task": 8}}) == []
    (batch,) = resource_errors(Study.from_config(config), {"train": {"gpu": 8}})
    assert batch.startswith("training.prompts_per_step: 50 × training.rollouts 5 = 250 responses per step do not "
                            "divide over the train job's 8 GPUs")
    assert "use prompts_per_step 48 or 56, or a GPU count among [1, 2, 5, 10, 25, 50]" in batch
    assert resource_errors(Study.from_config(config), {"score": {"gpu": 1, "threads": 8, "cpus_per_task": 4}}) == [
        "resources of rule score: cpus_per_task=4 < threads=8 (threads_per_job or set-threads); the job would "
        "oversubscribe its CPUs — raise cpus_per_task or lower threads"]
    config["cluster"] = {"partitions": {"gpu": {"gpus_per_node": 8, "max_runtime": 1440}}}
    two_nodes = {"train": {"gpu": 10, "nodes": 2, "slurm_partition": "gpu", "runtime": 2880}}
    assert resource_errors(Study.from_config(config), two_nodes) == [
        "resources of rule train: runtime=2880 exceeds cluster.partitions.gpu.max_runtime = 1440 minutes; lower the "
        "request (profile set-resources or --set-resources) or use another partition"]
    assert resource_errors(Study.from_config(config), {"corpus": {"slurm_partition": "gpuu"}}) == [
        "resources of rule corpus: slurm_partition='gpuu' is not in cluster.partitions; did you mean 'gpu'? "
        "(known: gpu)"]
