"""Campaigns: the study design as configs. The released design's campaigns plan exactly the authors' 171 runs; the
embedded overlay plans its cells; a longer step budget waits for, and continues, the shorter one; records name the
study cell of each run the way the released records do."""
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml
from snakemake.utils import update_config

from dataflex_rl.artefacts import layout
from dataflex_rl.study.resolved import Run, Study

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"
SNAKEFILE = ["--snakefile", str(REPO / "Snakefile")]
SNAKEMAKE = [sys.executable, "-m", "snakemake", *SNAKEFILE]


def config_of(*files: str) -> dict:
    """The config Snakemake makes of several --configfile files: each merged key by key over the ones before."""
    config: dict = {}
    for name in files:
        update_config(config, yaml.safe_load((REPO / name).read_text()))
    return config


def dry_run(*args: str) -> str:
    """The whole plan (--forceall), whatever of it a developer's checkout has already built under results/."""
    result = forked_snakemake.snakemake([*SNAKEFILE, "-n", "--forceall", *args], cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def train_jobs(output: str) -> dict[str, list[str]]:
    """{the train job's run directory: its inputs} from a dry run's job list."""
    jobs = {}
    for block in output.split("\nrule train:\n")[1:]:
        inputs = re.search(r"^\s+input: (.*)$", block, re.MULTILINE)[1].split(", ")
        model_dir = re.search(r"^\s+output: (\S+)/model,", block, re.MULTILINE)[1]
        jobs[model_dir] = inputs
    return jobs


def released_cells() -> Counter:
    runs = pd.read_csv(RELEASED, keep_default_na=False)
    return Counter((r.campaign, r.model, r.method, int(r.seed), int(r.steps), r.regime or None)
                   for r in runs.itertuples())


@pytest.mark.skipif(not RELEASED.is_file(), reason="the released records are not beside the repository")
def test_the_released_design_plans_exactly_the_authors_171_runs():
    config_files = ("config/paper.yaml", "config/campaigns/released.yaml")
    study = Study.from_config(config_of(*config_files))
    planned = Counter((cell.campaign, run.model, run.method, run.seed, run.steps, run.regime)
                      for cell in study.cells() for run in cell.runs)
    assert planned == released_cells() and sum(planned.values()) == 171

    jobs = train_jobs(dry_run("--profile", "profiles/slurm", "--configfile", *config_files))
    expected = {layout.run_dir(model, Run(model, method, seed, regime, steps).name)
                for _, model, method, seed, steps, regime in released_cells()}
    assert set(jobs) == expected  # the real DAG trains each released run once: none missing, none extra
    for run_dir, inputs in jobs.items():  # the 1,000-step runs wait for the main campaign's 300-step runs
        shorter = run_dir.replace("/steps1000", "/steps300") + "/provenance.json"
        assert (shorter in inputs) == run_dir.endswith("/steps1000"), run_dir


def test_the_embedded_overlay_plans_its_cells_and_chains_step_budgets():
    config_files = ("config/config.yaml", "config/campaigns/embedded.yaml")
    output = dry_run("--configfile", *config_files)
    jobs = train_jobs(output)
    assert len(jobs) == 12 + 6 + 6 + 6  # main, scale curve, constrained (label noise), long training
    study = Study.from_config(config_of(*config_files))
    assert [cell.name for cell in study.cells()] == [
        "tiny-qwen2@main", "tiny-qwen2-small@scale_curve", "tiny-qwen2@constrained:noise20_20pct_label_noise",
        "tiny-qwen2@long_training"]
    long_run = layout.run_dir("tiny-qwen2", Run("tiny-qwen2", "difffilter", 2, None, 160).name)
    assert layout.train_provenance("tiny-qwen2", Run("tiny-qwen2", "difffilter", 2, None, 80).name) in jobs[long_run]
    noisy = layout.run_dir("tiny-qwen2", Run("tiny-qwen2", "baseline", 1, "noise20_20pct_label_noise", 80).name)
    assert layout.regime_corpus("noise20_20pct_label_noise", "tiny-qwen2") in jobs[noisy]
    assert "campaign long_training: 1 model(s) × 1 regime(s) × 1 step budget(s) × 2 method(s) × 3 seed(s) = 6 " \
           "training runs" in output
    assert "30 distinct training runs in 4 study cells" in output


def test_a_run_and_its_step_budgets_share_one_training_line():
    short, long = Run("m", "topk", 3, None, 300), Run("m", "topk", 3, None, 1000)
    assert short.name == "full/topk/seed3/steps300" and layout.parse_run(long.name) == ("topk", 3, None, 1000)
    assert layout.train_state("m", short.name) == layout.train_state("m", long.name) == "results/runs/m/full/topk/" \
                                                                                          "seed3/state"
    noisy = Run("m", "topk", 3, "noise20", 300)
    assert layout.train_state("m", noisy.name) != layout.train_state("m", short.name)
    assert layout.parse_run(noisy.name).regime == "noise20"


def test_a_config_without_campaigns_is_one_cell_per_model_named_after_it():
    study = Study.from_config(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    (cell,) = study.cells()
    assert cell.name == "tiny-qwen2" and cell.extras == {} and len(cell.runs) == 12
    assert {run.steps for run in study.runs} == {80} and {run.regime for run in study.runs} == {None}


def test_a_study_checks_every_declared_model_and_knows_the_methods_each_trains():
    """The campaign expansion is the study's: the models a campaign trains, every declared one (an unused model is
    still checked at dry-run time), and the methods trained on each, from the same runs the jobs are planned from."""
    config = config_of("config/config.yaml", "config/campaigns/embedded.yaml")
    config["models"]["unused"] = {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}
    study = Study.from_config(config)
    assert list(study.declared_models) == ["tiny-qwen2", "tiny-qwen2-small", "unused"]
    assert list(study.models) == ["tiny-qwen2", "tiny-qwen2-small"]
    assert set(study.methods_trained_on("tiny-qwen2-small")) == {"baseline", "difffilter"}
    assert list(study.methods_trained_on("tiny-qwen2")) == [name for name in study.methods
                                                           if any(run.method == name and run.model == "tiny-qwen2"
                                                                  for run in study.runs)]
    assert study.methods_trained_on("unused") == {}
    without_campaigns = Study.from_config(yaml.safe_load((REPO / "config/config.yaml").read_text()))
    assert without_campaigns.methods_trained_on("tiny-qwen2") == without_campaigns.methods


@pytest.mark.slow
def test_the_campaign_path_runs_end_to_end_on_the_smoke_study(smoke_study_copy):
    """The embedded overlay in smoke form (3 vs 6 steps, the smoke model's shape for the second model): every campaign
    rule runs, the 6-step runs continue the 3-step checkpoints, and the long-training and constrained-data tables
    have rows from the study's own records. It runs on a copy of the finished smoke study (tests/conftest.py): the
    overlay's main campaign is the smoke study's matrix, whose jobs Snakemake finds done there, so only the jobs the
    other campaigns add, and the records and tables of all four, run here."""
    study = smoke_study_copy
    overlay = yaml.safe_load((REPO / "config/campaigns/embedded.yaml").read_text())
    overlay["study"] = "smoke-campaigns"
    smoke = yaml.safe_load((REPO / "config/smoke.yaml").read_text())
    overlay["models"]["tiny-qwen2-small"] = {**smoke["models"]["tiny-qwen2"],
                                             "shape": {**smoke["models"]["tiny-qwen2"]["shape"], "hidden_size": 16}}
    overlay["campaigns"]["long_training"]["steps"] = [6]
    (study / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    result = subprocess.run([*SNAKEMAKE, "--cores", "2", "--configfile", str(REPO / "config/smoke.yaml"),
                             str(study / "overlay.yaml"), "--directory", str(study)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]

    long_run = Run("tiny-qwen2", "difffilter", 2, None, 6).name
    assert "resuming from step 3 of" in (study / f"logs/train/tiny-qwen2/{long_run}.log").read_text()
    short_run = Run("tiny-qwen2", "difffilter", 2, None, 3).name
    assert len(pd.read_parquet(study / layout.metrics("tiny-qwen2", short_run))) == 3  # kept as its own artefact
    assert len(pd.read_parquet(study / layout.metrics("tiny-qwen2", long_run))) == 6

    noise = "noise20_20pct_label_noise"
    audit = json.loads((study / layout.regime_audit(noise, "tiny-qwen2")).read_text())
    corpus = pd.read_parquet(study / layout.CORPUS_CLEAN)
    assert audit["rows_in"] == len(corpus) and audit["changed"] == int(0.2 * len(corpus) + 0.5)

    records = pd.read_parquet(study / layout.RECORDS)
    assert set(records["campaign"].dropna()) == {"main", "scale_curve", "constrained", "long_training"}
    assert set(records.loc[records["regime"].notna(), "model"]) == {f"tiny-qwen2@constrained:{noise}"}
    tables = study / "results/tables/smoke-campaigns"
    long_training = pd.read_csv(tables / "long_training.csv")
    constrained = pd.read_csv(tables / "constrained_data.csv")
    assert set(long_training["method"]) == {"difffilter"} and set(constrained["method"]) == {"difffilter"}
    cross = pd.read_csv(tables / "cross_model.csv")
    assert "tiny-qwen2-small@scale_curve" in set(cross["model"])
    curve = pd.read_csv(tables / "scale_curve.csv")  # difffilter, at full data and the fewest steps of each model
    assert curve["method"].tolist() == ["difffilter"]
    assert set(curve.columns) == {"method", "control", "tiny-qwen2@main", "tiny-qwen2-small@scale_curve"}

    # The original config's audit on this folder: its own runs are all complete and current, but the records, and the
    # tables a same-named overlay writes, are the overlay's; the headline says so before the counts.
    (study / "same_name.yaml").write_text(yaml.safe_dump({**overlay, "study": "smoke"}))
    for args in (["tables", "--cores", "1", "--configfile", str(REPO / "config/smoke.yaml"),
                  str(study / "same_name.yaml")],
                 ["audit", "--cores", "1", "--configfile", str(REPO / "config/smoke.yaml")]):
        result = subprocess.run([*SNAKEMAKE, *args, "--directory", str(study)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads((study / layout.AUDIT_JSON).read_text())
    outside = len(set(records["run_id"]))
    assert report["counts"]["complete"] == 9 and report["counts"]["stale"] == 0
    assert report["built_elsewhere"]["records"] == {"file": layout.RECORDS, "runs_outside_matrix": outside,
                                                    "runs_covered": 0, "runs": 9}
    markdown = (study / layout.AUDIT_MD).read_text()
    assert markdown.index("**Built from another config") < markdown.index("9 cells (runs and untrained bases)")
    assert (f"- `{layout.RECORDS}` was built from another config: it holds the records of {outside} run(s) outside "
            "this study's matrix and covers 0 of its 9 runs.") in markdown
    assert ("- The tables in `results/tables/smoke` are not this config's: built from the records in "
            f"{layout.RECORDS}, which are another config's.") in markdown


def test_the_summary_names_the_models_and_regimes_no_campaign_uses(tmp_path):
    """A declared model or regime that no campaign trains is not built; the dry run says so instead of staying
    silent."""
    config = config_of("config/smoke.yaml")
    config["models"]["spare-qwen2"] = config["models"]["tiny-qwen2"]
    config["regimes"] = {"noisy": {"transform": "noisy_rewards", "fraction": 0.5, "p": 0.5, "seed": 1},
                         "spare_subset": {"transform": "subset", "fraction": 0.5, "seed": 1}}
    config["campaigns"] = {"main": {"models": ["tiny-qwen2"], "regimes": ["full", "noisy"]}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    output = dry_run("--cores", "1", "--configfile", str(tmp_path / "config.yaml"), "--directory", str(tmp_path))
    assert ("declared but in no campaign, so not built: models spare-qwen2; regimes spare_subset (add them to a "
            "campaign's models or regimes, or remove them)") in output
    assert "declared but in no campaign" not in dry_run("--cores", "1", "--configfile", "config/smoke.yaml")


def test_a_prompt_selection_with_its_own_validation_file_draws_nothing_from_an_unbalanced_pool(tmp_path):
    """The unbalanced pool's check of its target rows counts the prompt selections that draw their validation
    prompts from the corpus; one reading its own file draws none, so a pool without the target domain still runs
    it, and the corpus holds nothing out of the other methods for it."""
    from dataflex_rl.study.campaign_checks import campaign_errors

    config = config_of("config/smoke.yaml")
    config["regimes"] = {"no_science": {"transform": "unbalanced", "target_domain": "science", "share": 0.0}}
    config["methods"]["gradalign"] = {"policy": "gradalign", "control": "baseline",
                                      "params": {"candidates_per_round": 24}}
    config["campaigns"] = {"unbalanced_pool": {"regimes": ["no_science"], "methods": ["baseline", "gradalign"]}}
    refused = campaign_errors(Study.from_config(config), tmp_path)
    assert any("fewer than the 32 validation prompts (validation_size) of methods.gradalign" in e for e in refused)
    config["methods"]["gradalign"]["params"]["validation"] = {"path": "data/validation.jsonl"}
    study = Study.from_config(config)
    assert campaign_errors(study, tmp_path) == []
    assert study.validation_draws("tiny-qwen2", "no_science") == []
    assert all("validation_draws" not in study.train_job(run) for run in study.runs)
