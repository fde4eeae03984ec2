"""The dry run's power plan (dataflex_rl.study.power_plan, docs/study-planning.md): the paired-t MDE and seeds needed
against statsmodels' TTestPower, by hand and on the released records; the variance source's matching rule; what it
says without a source; the refusals; and the plan as `snakemake -n` prints it for the paper config."""
import copy
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from statsmodels.stats.power import TTestPower

from dataflex_rl.artefacts import layout
from dataflex_rl.records.imported import import_released_runs
from dataflex_rl.stats import power, seeds
from dataflex_rl.stats.paired import compare_methods
from dataflex_rl.stats.power import minimum_detectable_effect, paired_t_power, seeds_needed
from dataflex_rl.stats.seeds import detectable_effects
from dataflex_rl.stats.simulate import simulate_records
from dataflex_rl.stats.summaries import run_summaries
from dataflex_rl.study import mde_cache
from dataflex_rl.study.config_checks import study_errors
from dataflex_rl.study.plan import planned_jobs
from dataflex_rl.study.power_plan import power_lines, seed_hours
from dataflex_rl.study.resolved import Study

from config_edits import set_key

REPO = Path(__file__).resolve().parents[1]
RELEASED = REPO.parent / "shared/data/dataflex-rl-records/all_runs_171.csv"
needs_release = pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")
PAPER = yaml.safe_load((REPO / "config/paper.yaml").read_text())
# The verl jobs' requests under profiles/slurm (the paper dry run's table): train 8 GPUs × 48 h, score 1 GPU × 2 h.
RESOURCES = {"train": {"gpu": 8, "cpus_per_task": 40, "runtime": 2880}, "merge": {"cpus_per_task": 8, "runtime": 60},
             "score": {"gpu": 1, "cpus_per_task": 8, "runtime": 120}}
SOLVER = TTestPower()


def _study(**stats) -> Study:
    config = copy.deepcopy(PAPER)
    for key, value in stats.items():
        set_key(config, f"stats.{key}", value)
    return Study.from_config(config)


def _line(lines: list[str], start: str) -> str:
    found = [line.strip() for line in lines if line.strip().startswith(start)]
    assert len(found) == 1, lines
    return found[0]


@pytest.mark.parametrize("n, power_, alpha", [(3, 0.8, 0.05), (6, 0.8, 0.05), (12, 0.8, 0.05), (12, 0.9, 0.01),
                                              (40, 0.8, 0.05 / 12), (200, 0.95, 0.05)])
def test_the_mde_is_statsmodels_effect_size_at_that_power(n, power_, alpha):
    mde = minimum_detectable_effect(1.5, n, power_, alpha)
    # statsmodels' root finder stops at ~1e-6 relative; its power at our MDE is the asked power to the last bits
    assert mde / 1.5 == pytest.approx(SOLVER.solve_power(effect_size=None, nobs=n, alpha=alpha, power=power_,
                                                         alternative="two-sided"), rel=1e-5)
    assert SOLVER.power(effect_size=mde / 1.5, nobs=n, alpha=alpha, alternative="two-sided") == \
        pytest.approx(power_, abs=1e-9)
    assert paired_t_power(mde, 1.5, n, alpha) == pytest.approx(power_, abs=1e-9)


@pytest.mark.parametrize("effect, power_, alpha", [(1.0, 0.8, 0.05), (0.5, 0.8, 0.05), (0.25, 0.9, 0.01),
                                                   (0.632, 0.8, 0.05), (2.0, 0.8, 0.05), (3.0, 0.8, 0.05),
                                                   (0.2, 0.5, 0.2), (0.3, 0.8, 0.4), (0.05, 0.8, 0.2)])
def test_the_seeds_needed_are_statsmodels_nobs_rounded_up(effect, power_, alpha):
    """Including large α, where the textbook ((z_{1−α/2} + z_power)·σ/δ)² is no lower bound (it drops the far tail)."""
    nobs = SOLVER.solve_power(effect_size=effect, nobs=None, alpha=alpha, power=power_, alternative="two-sided")
    assert abs(nobs - round(nobs)) > 0.01  # not at an integer, where the two solvers' tolerances could round apart
    n = seeds_needed(2.0 * effect, 2.0, power_, alpha)
    assert n == math.ceil(nobs)
    assert minimum_detectable_effect(2.0, n, power_, alpha) <= 2.0 * effect < \
        minimum_detectable_effect(2.0, n - 1, power_, alpha)


def test_seeds_needed_without_a_spread_or_below_two():
    assert seeds_needed(1.0, 0.0) is None and seeds_needed(1.0, math.nan) is None
    assert seeds_needed(100.0, 1.0) == 2  # a paired t needs two seeds however large the effect


def test_detectable_effects_and_the_planner_share_one_function():
    assert seeds.minimum_detectable_effect is power.minimum_detectable_effect
    table = detectable_effects(pd.DataFrame([{"model": "m", "method": "x", "control": "baseline", "metric": "DB-12",
                                              "n_seeds": 3, "sd": 1.581883, "delta_mean": 0.5}]), (3, 12))
    assert table.loc[0, "mde_12_seeds"] == minimum_detectable_effect(1.581883, 12)
    assert table.loc[0, "mde"] == table.loc[0, "mde_3_seeds"] == minimum_detectable_effect(1.581883, 3)


# Run afresh: a plan's standardised MDE at 12 seeds, and whether reading it imported scipy.stats.
REMEMBERED = """
import sys
from dataflex_rl.study.mde_cache import RememberedMdes
print(repr(RememberedMdes(sys.argv[1])(12, 0.8, 0.05)), "scipy.stats" in sys.modules)
"""


def _remembered(workdir: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-c", REMEMBERED, str(workdir)], capture_output=True, text=True,
                            check=True)
    return result.stdout.split()


def test_a_dry_run_remembers_its_roots_and_the_next_plans_with_them_without_scipy(tmp_path):
    """The plan's roots are kept under the working directory (dataflex_rl.study.mde_cache): a later plan gets the same
    floats, bit for bit, without importing scipy.stats; a damaged file, or one written under another scipy, is
    computed again and written anew."""
    computed = repr(power.standardised_mde(12, 0.8, 0.05))
    assert _remembered(tmp_path) == [computed, "True"]  # nothing kept yet: computed with scipy
    first = power_lines(_study(), RESOURCES, tmp_path)
    kept = tmp_path / mde_cache.PATH
    assert json.loads(kept.read_text())["values"] == {"12 0.8 0.05": float(computed)}
    assert _remembered(tmp_path) == [computed, "False"]
    assert power_lines(_study(), RESOURCES, tmp_path) == first

    for damaged in ("{", json.dumps({"scipy": "0.1", "values": {"12 0.8 0.05": 1.0}})):
        kept.write_text(damaged)
        assert _remembered(tmp_path) == [computed, "True"]
        assert power_lines(_study(), RESOURCES, tmp_path) == first
        assert _remembered(tmp_path) == [computed, "False"]


@needs_release
def test_the_paper_plan_against_the_released_records():
    """Qwen2.5-7B-base's cross-family cell is the release's only one of the paper's model (case aside), and its
    largest DB-12 spread is maxvar − baseline's, as the comparisons table has it."""
    lines = power_lines(_study(variance_from=str(RELEASED)), RESOURCES, REPO)
    summaries = run_summaries(import_released_runs(RELEASED))
    comparisons = compare_methods(summaries, "DB-12", controls={"maxvar": "baseline"},
                                  model="Qwen2.5-7B-base@crossfamily")
    sd = float(comparisons.loc[0, "sd"])
    assert sd == pytest.approx(1.581883, abs=1e-6)
    d12 = SOLVER.solve_power(effect_size=None, nobs=12, alpha=0.05, power=0.8, alternative="two-sided")
    nobs = SOLVER.solve_power(effect_size=1.0 / sd, nobs=None, alpha=0.05, power=0.8, alternative="two-sided")
    assert (round(sd * d12, 2), math.ceil(nobs)) == (1.41, 22)
    # a seed: 13 runs × (train 8 GPUs × 48 h + 12 score jobs × 1 GPU × 2 h) = 5,304 GPU-h
    assert _line(lines, "DB-12:") == (
        f"DB-12: SD {sd:.2f} pt (Qwen2.5-7B-base@crossfamily, maxvar − baseline, 3 seeds; the largest of 3 pair(s)) → "
        f"MDE {sd * d12:.2f} pt at 12 seeds (63,648.0 GPU-h, 330,720.0 CPU-h); 1 pt needs 22 seeds "
        f"(116,688.0 GPU-h, 606,320.0 CPU-h)")
    assert _line(lines, "qwen2.5-7b-base:").endswith("source cell(s) Qwen2.5-7B-base@crossfamily")
    assert _line(lines, "no spread for").startswith("no spread for gfpo − baseline, ar − baseline, per − baseline")
    assert [line.split(":")[0].strip() for line in lines if " pt needs " in line] == [
        "DB-12", "Macro-12", "Item-12", "Math-Heavy-6"]


@needs_release
def test_settings_move_the_plan():
    lines = power_lines(_study(variance_from=str(RELEASED), power=0.9, alpha=0.01, target_mde=2.0), RESOURCES, REPO)
    assert "α 0.01 (stats.alpha), 90% power (stats.power), target 2 pt (stats.target_mde)" in lines[0]
    mde = minimum_detectable_effect(1.581883, 12, 0.9, 0.01)
    needed = seeds_needed(2.0, 1.581883, 0.9, 0.01)
    assert f"MDE {mde:.2f} pt at 12 seeds" in _line(lines, "DB-12:")
    assert f"2 pt needs {needed} seeds" in _line(lines, "DB-12:")


def test_seed_hours_are_the_cost_plans_per_run_hours():
    """n seeds × a seed's hours + the untrained base's score jobs = the cost plan's train, merge and score hours."""
    study = _study()
    jobs = planned_jobs(study)
    per_seed = seed_hours(study, study.cells()[0], RESOURCES)
    total = {rule: jobs[rule] * RESOURCES[rule].get("gpu", 0) * RESOURCES[rule]["runtime"] / 60 for rule in RESOURCES}
    base_scoring = len(study.benchmarks.names) * 1 * 120 / 60
    assert 12 * per_seed.gpu + base_scoring == sum(total.values()) == 59_904 + 3_768
    assert seed_hours(study, study.cells()[0], {**RESOURCES, "score": {"gpu": 1}}) is None  # no runtime: unknown


def test_without_a_source_the_plan_gives_the_mde_in_sds(tmp_path):
    lines = power_lines(_study(), RESOURCES, tmp_path)
    assert lines[1].strip() == "no variance source (stats.variance_from unset)"
    unit = minimum_detectable_effect(1.0, 12)
    assert lines[2].strip() == (f"qwen2.5-7b-base: 12 seeds, a seed 13 runs (5,304.0 GPU-h, 27,560.0 CPU-h); "
                                f"MDE {unit:.3f} × the SD of paired differences at 12 seeds")
    assert len(lines) == 3
    # the study's own records before they exist: no error, no source yet
    own = _study(variance_from=layout.RECORDS)
    assert not any("variance_from" in error for error in study_errors(own, tmp_path))
    assert "no variance source yet: results/records/records.parquet" in power_lines(own, RESOURCES, tmp_path)[1]


def test_the_study_own_records_match_every_pair_by_cell_name(tmp_path):
    records = simulate_records(["qwen2.5-7b-base"], list(PAPER["methods"]), [1, 2, 3, 4], rng=3)
    (tmp_path / layout.RECORDS).parent.mkdir(parents=True)
    records.to_parquet(tmp_path / layout.RECORDS)
    lines = power_lines(_study(variance_from=layout.RECORDS), RESOURCES, tmp_path)
    assert lines[1].strip().startswith(f"variance from {layout.RECORDS} (stats.variance_from)")
    assert _line(lines, "qwen2.5-7b-base:").endswith("source cell(s) qwen2.5-7b-base")
    summaries = run_summaries(records)
    comparisons = compare_methods(summaries, "DB-12", controls=_study().controls())
    top = comparisons.loc[comparisons["sd"].idxmax()]
    assert _line(lines, "DB-12:").startswith(f"DB-12: SD {top['sd']:.2f} pt (qwen2.5-7b-base, {top['method']} − "
                                             f"{top['control']}, 4 seeds; the largest of 12 pair(s))")
    assert not any(line.strip().startswith("no spread") for line in lines)


@needs_release
def test_a_cell_without_a_match_or_a_pair_in_several_says_so(tmp_path):
    renamed = Study.from_config({**copy.deepcopy(PAPER), "models": {"other-model": PAPER["models"]["qwen2.5-7b-base"]},
                                 "stats": {"variance_from": str(RELEASED)}})
    line = _line(power_lines(renamed, RESOURCES, REPO), "other-model:")
    assert line.endswith("no source cell matches (none named other-model, none of model other-model on full data at "
                         "300 steps)")
    longer = copy.deepcopy(PAPER)
    set_key(longer, "training.steps", 1000)  # the release has Qwen2.5-7B-base at 300 steps only
    set_key(longer, "stats.variance_from", str(RELEASED))
    assert "no source cell matches" in _line(power_lines(Study.from_config(longer), RESOURCES, REPO),
                                             "qwen2.5-7b-base:")
    # the cross-family runs twice, under two campaign names: both cells match, so no pair takes a spread
    raw = pd.read_csv(RELEASED, dtype=str, keep_default_na=False)
    cell = raw[(raw["campaign"] == "crossfamily") & (raw["model"] == "Qwen2.5-7B-base")]
    twice = pd.concat([cell.assign(campaign="a", run_id=cell["run_id"] + "a"),
                       cell.assign(campaign="b", run_id=cell["run_id"] + "b")])
    twice.to_csv(tmp_path / "pilot.csv", index=False)
    lines = power_lines(_study(variance_from="pilot.csv"), RESOURCES, tmp_path)
    assert _line(lines, "qwen2.5-7b-base:").endswith("source cell(s) Qwen2.5-7B-base@a, Qwen2.5-7B-base@b")
    assert ("no spread for difffilter − baseline (in Qwen2.5-7B-base@a, Qwen2.5-7B-base@b), maxvar − baseline (in "
            "Qwen2.5-7B-base@a, Qwen2.5-7B-base@b)") in _line(lines, "no spread for difffilter")
    assert all(" pt needs " not in line for line in lines)


@needs_release
def test_a_source_on_other_benchmarks_is_no_source():
    config = copy.deepcopy(PAPER)
    config["benchmarks"]["names"] = [b for b in config["benchmarks"]["names"] if b != "GPQA-Diamond"]
    set_key(config, "stats.variance_from", str(RELEASED))
    lines = power_lines(Study.from_config(config), RESOURCES, REPO)
    assert lines[1].strip() == (f"no variance source: {RELEASED} (stats.variance_from) scores other benchmarks than "
                                f"this study (differing: GPQA-Diamond), so its summaries are not this study's")


def test_a_missing_or_unreadable_source_is_refused(tmp_path):
    errors = study_errors(_study(variance_from="nothere.csv"), tmp_path)
    assert (f"stats.variance_from: 'nothere.csv' does not exist (relative to {str(tmp_path)!r}); name the released "
            f"run table, a pilot study's records or this study's results/records/records.parquet, or remove the "
            f"key") in errors
    (tmp_path / "notes.csv").write_text("a,b\n1,2\n")
    assert not any("variance_from" in e for e in study_errors(_study(variance_from="notes.csv"), tmp_path))
    with pytest.raises(ValueError, match=r"stats.variance_from: 'notes.csv' is not a records table the tables could "
                                         r"read \(.*\); name the released run table"):
        power_lines(_study(variance_from="notes.csv"), RESOURCES, tmp_path)


def test_the_planner_keys_change_no_table():
    assert _study().tables_slice() == _study(power=0.9, alpha=0.01, target_mde=0.5,
                                             variance_from="x.csv").tables_slice()
    assert not {"stats.power", "stats.alpha", "stats.target_mde", "stats.variance_from"} & set(_study().tables_slice())


@needs_release
def test_the_paper_dry_run_prints_the_plan_beside_the_cost_plan(tmp_path):
    environment = {key: value for key, value in os.environ.items() if key != "SNAKEMAKE_PROFILE"}
    environment.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / ".config"))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"), "--profile",
         "profiles/slurm", "--configfile", "config/paper.yaml", "--config",
         f"stats={{variance_from: {os.path.relpath(RELEASED, REPO)}}}"],
        cwd=REPO, capture_output=True, text=True, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    plan = result.stderr.split("63,672.0 GPU-hours", 1)[1]
    assert re.search(r"^      DB-12: SD 1\.58 pt \(Qwen2\.5-7B-base@crossfamily, maxvar − baseline, 3 seeds; .*\) → MDE "
                     r"1\.41 pt at 12 seeds \(63,648\.0 GPU-h, .*\); 1 pt needs 22 seeds \(116,688\.0 GPU-h",
                     plan, re.MULTILINE)
