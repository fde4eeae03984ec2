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
from dataflex_rl.study.resolved import Study

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
        assert ("target_domain" in job) == (spec.family is Family.prompt_selection)
        target_domains.add(job.get("target_domain"))
    # the unbalanced pool's prompt selections validate on science; the noisy pool's on any domain
    assert target_domains == {None, "science"}


def test_the_verl_backend_refuses_a_family_that_needs_a_probe():
    methods = {name: MethodSpec(name, name, {}, CATALOGUE[name].family) for name in ("gradalign", "topk", "static")}
    model = ModelSpec.from_entry("big", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"})
    errors = VerlBackend().config_errors("models.big", model, REPO, True, methods)
    assert errors == ["methods.gradalign.policy: 'gradalign' is a prompt_selection method, which the verl backend "
                      "(models.big) does not run in this version: its selection rounds score candidate prompts with "
                      "extra rollouts and gradients outside verl's training step — remove the method, or run it on an "
                      "embedded model"]
