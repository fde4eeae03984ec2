"""The family records (dataflex_rl.policies.catalogue.Family): what each family says of its policies, that every
catalogued policy holds its family's record, and that the readers (a train job, the verl backend) go through it.
Torch-free."""
import json
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.backends.verl.backend import VerlBackend
from dataflex_rl.artefacts.layout import SELECTION_TABLES
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import CATALOGUE, MASK, WEIGHTS, Family, PolicySpec, Role
from dataflex_rl.study.resolved import HELD_OUT_KEY, Study

REPO = Path(__file__).resolve().parents[1]


def test_each_family_record_says_what_its_policies_share():
    # docs/policies.md and docs/prompt_selection.md: a selection keeps or drops responses and has a matched-random
    # control, a reweighting weighs them, a mixture steers the prompt stream, a prompt selection scores candidate
    # prompts with the backend's gradient probe and adds the selection tables
    records = {family.name: (family.role, family.output, family.needs_probe, family.matched_random_control,
                             family.tables, family.module) for family in Family}
    assert records == {
        "none": (Role.RESPONSE_POLICY, None, False, False, (), None),
        "selection": (Role.RESPONSE_POLICY, MASK, False, True, (), "selection"),
        "reweighting": (Role.RESPONSE_POLICY, WEIGHTS, False, False, (), "reweighting"),
        "mixture": (Role.MIXTURE, None, False, False, (), "mixture"),
        "prompt_selection": (Role.PROMPT_SELECTION, None, True, False,
                             ("selection_rounds", "selection_composition", "selection_overhead"), "prompt_selection")}
    assert Family.prompt_selection.tables == SELECTION_TABLES  # the tables the selection_tables rule writes
    assert [family.name for family in Family] == [family.value for family in Family]  # a member is named by its name


def test_each_catalogued_policy_holds_its_family_record():
    members = {family.name: sorted(name for name, spec in CATALOGUE.items() if spec.family is family)
               for family in Family}
    assert members == {
        "none": ["baseline"], "selection": ["difffilter", "gfpo", "maxvar", "topk"],
        "reweighting": ["ar", "diffband", "per", "softmax"],
        "mixture": ["dump_ucb", "reward_gap", "static", "tscl"],
        "prompt_selection": ["accgreedy", "align", "gradalign", "random_prompts", "simacc", "validation_set"]}
    assert all(spec.options is spec.family.options for spec in CATALOGUE.values())


def test_a_policy_spec_refuses_a_family_given_by_name():
    with pytest.raises(TypeError, match=r"policy 'longest_correct': family 'selection' is not a Family; write "
                                        r"Family.<name>, one of none, selection, reweighting, mixture"):
        PolicySpec("longest_correct", "selection", "reward")


def test_a_train_job_carries_the_family_by_name_and_reads_it_back():
    config: dict = {}
    for overlay in ("config/config.yaml", "config/campaigns/gradalign.yaml"):  # as Snakemake merges --configfile
        update_config(config, yaml.safe_load((REPO / overlay).read_text()))
    study = Study.from_config(config)
    target_domains = set()
    for run in study.runs:
        job = study.train_job(run)
        spec = study.methods[run.method]
        assert type(job["method"]["family"]) is str and job["method"]["family"] == spec.family.name
        assert f"'family': '{spec.family.name}'" in repr(job)  # the params repr the rule hands Snakemake
        read = MethodSpec.from_job(json.loads(json.dumps(job["method"])))
        assert read.family is spec.family and read == MethodSpec(spec.name, spec.policy, spec.params, spec.family)
        # every run of the campaign trains on a corpus a prompt selection validates on: all carry its domain
        assert "target_domain" in job
        # a baseline holds out the prompt selections' validation rows; a prompt selection draws its own itself, and
        # holds out the others' where its corpus has more than one draw (the unbalanced pool: Table 4's sizes)
        own_draw_only = spec.family is Family.prompt_selection and run.regime != "science_unbalanced"
        assert ("validation_draws" in job) == (not own_draw_only)
        target_domains.add(job.get("target_domain"))
    # the unbalanced pool's prompt selections validate on science; the noisy and low-utility pools' on any domain
    assert target_domains == {None, "science"}


def test_the_validation_rows_of_a_corpus_are_held_out_of_every_method_trained_on_it():
    """One place (Study.validation_draws) says which validation draws a corpus holds out; every run on that corpus,
    the baseline and the other methods too, gets the same draws in its job and its slice, for every seed."""
    config: dict = {}
    for overlay in ("config/config.yaml", "config/campaigns/gradalign.yaml"):  # as Snakemake merges --configfile
        update_config(config, yaml.safe_load((REPO / overlay).read_text()))
    config["methods"]["gradalign_v10"] = {"policy": "gradalign", "params": {"validation_size": 10},
                                          "control": "random"}
    config["campaigns"]["noisy_rewards"]["methods"].append("gradalign_v10")
    study = Study.from_config(config)
    by_regime = {}
    for run in study.runs:
        assert study.validation_draws(run.model, run.regime) == {
            "noisy50": [[10, 0], [32, 0]], "science_unbalanced": [[10, 0], [30, 0], [32, 0], [100, 0]],
            "easy20": [[32, 0]]}[run.regime]
        job, slice_ = study.train_job(run), study.train_slice(run)
        assert job.get("validation_draws") == slice_.get(HELD_OUT_KEY)
        by_regime.setdefault((run.regime, run.method), set()).add(repr(job.get("validation_draws")))
    # noisy50 holds out both sizes' draws (32 and 10 rows, seed 0) from every method, prompt selections included
    assert {key: draws for key, draws in by_regime.items() if key[0] == "noisy50"} == {
        ("noisy50", method): {"[[10, 0], [32, 0]]"} for method in
        ("baseline", "gradalign", "random", "accgreedy", "align", "gradalign_dot", "validation_only", "gradalign_v10")}
    # the low-utility pool's only draw is its prompt selections' own, so they hold out nothing more
    assert by_regime[("easy20", "baseline")] == {"[[32, 0]]"}
    assert by_regime[("easy20", "gradalign")] == {"None"}
    # the unbalanced pool holds out Table 4's sizes (10, 30, 32 and 100 rows) from every method
    assert by_regime[("science_unbalanced", "gradalign")] == {"[[10, 0], [30, 0], [32, 0], [100, 0]]"}


def test_a_study_without_a_prompt_selection_holds_nothing_out():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    study = Study.from_config(config)
    assert not any(study.methods[run.method].family is Family.prompt_selection for run in study.runs)
    for run in study.runs:
        assert "validation_draws" not in study.train_job(run) and HELD_OUT_KEY not in study.train_slice(run)


def test_the_verl_backend_runs_a_prompt_selection_but_not_its_adam_preconditioning():
    methods = {name: MethodSpec(name, name, {}, CATALOGUE[name].family) for name in ("gradalign", "topk", "static")}
    model = ModelSpec.from_entry("big", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"})
    assert VerlBackend().config_errors("models.big", model, REPO, True, methods) == []
    methods["gradalign"] = MethodSpec("gradalign", "gradalign", {"precondition": "adam"}, Family.prompt_selection)
    errors = VerlBackend().config_errors("models.big", model, REPO, True, methods)
    assert errors == ["methods.gradalign.params.precondition: 'adam' divides g_v by Adam's second moment, which on "
                      "the verl backend lives in the FSDP optimiser shards of the run's checkpoint, not in the merged "
                      "weights the probe scores; the released loop never enabled it — use precondition: none (the "
                      "default) on verl (models.big is a verl model)"]