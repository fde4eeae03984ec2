"""The training-curves figure: rolling means, seed bands and the rule that reads the runs' metrics."""
import numpy as np
import pandas as pd
import pytest

from dataflex_rl.artefacts import layout
from dataflex_rl.report.figures import training_curves, training_curves_plot


def _run(method, seed, rewards, kept, model="m"):
    return pd.DataFrame({"model": model, "method": method, "seed": seed, "step": range(len(rewards)),
                         "mean_reward": rewards, "kept_fraction": kept, "kl": 0.0, "p:math": 1.0})


def test_rolling_mean_then_mean_and_band_over_seeds():
    runs = pd.concat([
        _run("b", 1, [0.0, 3.0, 6.0, 9.0], [1.0, 1.0, 0.5, 0.5]),
        _run("b", 2, [3.0, 3.0, 3.0, 3.0], [0.0, 0.0, 0.0, 0.0]),
        _run("a", 1, [1.0, 1.0, 1.0, 1.0], [0.2, 0.4, 0.6, 0.8]),
    ], ignore_index=True)
    curves = training_curves(runs, window=2)
    # Seed 1 of b, trailing 2-step means (1 step at the start): 0, 1.5, 4.5, 7.5; seed 2: 3 throughout.
    b = curves[curves["method"] == "b"]
    np.testing.assert_allclose(b["mean_reward"], [1.5, 2.25, 3.75, 5.25])
    np.testing.assert_allclose(b["mean_reward_low"], [0.0, 1.5, 3.0, 3.0])
    np.testing.assert_allclose(b["mean_reward_high"], [3.0, 3.0, 4.5, 7.5])
    np.testing.assert_allclose(b["kept_fraction"], [0.5, 0.5, 0.375, 0.25])
    assert b["n_seeds"].tolist() == [2, 2, 2, 2]
    a = curves[curves["method"] == "a"]
    np.testing.assert_allclose(a["kept_fraction"], [0.2, 0.3, 0.5, 0.7])
    assert a["n_seeds"].tolist() == [1] * 4
    assert list(pd.unique(curves["method"])) == ["b", "a"]  # the order of the runs (the config's), not sorted


def test_window_one_is_the_raw_metrics_and_steps_are_sorted():
    run = _run("b", 1, [0.1, 0.5, 0.3], [1.0, 0.0, 1.0]).iloc[::-1]
    curves = training_curves(run, window=1)
    assert curves["step"].tolist() == [0, 1, 2]
    np.testing.assert_allclose(curves["mean_reward"], [0.1, 0.5, 0.3])


def test_refuses_missing_columns_and_repeated_steps():
    with pytest.raises(ValueError, match="kept_fraction"):
        training_curves(_run("b", 1, [0.1], [1.0]).drop(columns="kept_fraction"))
    run = _run("b", 1, [0.1, 0.2], [1.0, 1.0])
    with pytest.raises(ValueError, match="repeats"):
        training_curves(pd.concat([run, run]))


def test_plot_writes_a_png_for_several_models(tmp_path):
    runs = pd.concat([_run(m, s, np.linspace(0, 1, 30), np.full(30, 0.5), model=model)
                      for model in ("m1", "m2") for m in ("b", "a") for s in (1, 2)], ignore_index=True)
    path = tmp_path / "figures/training_curves.png"
    training_curves_plot(training_curves(runs), path, window=10)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- the Snakemake rule -------------------------------------------------------------------------------------------
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from dataflex_rl.artefacts.provenance import write_provenance  # noqa: E402

import forked_snakemake  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SNAKEFILE = ["--snakefile", str(REPO / "Snakefile")]
SNAKEMAKE = [sys.executable, "-m", "snakemake", *SNAKEFILE]
RELEASED = REPO.parent / "shared/data/dataflex-rl-records/all_runs_171.csv"


def _jobs(output):
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.MULTILINE)
            if m.group(1) != "total"}


def _curves(tmp_path):
    return subprocess.run([*SNAKEMAKE, "training_curves", "--allowed-rules", "training_curves", "--cores", "1",
                           "--configfile", str(REPO / "config/config.yaml"), "--directory", str(tmp_path)],
                          capture_output=True, text=True)


def test_rule_reads_every_runs_metrics_and_writes_the_figure_and_refuses_an_edited_file(tmp_path):
    """Only the metrics and their train records exist; the rule is allowed alone, so nothing can train, and it plots
    the config's 12 runs. A metrics file edited after its record was written is refused, naming it, as the audit
    names it."""
    for method in ("baseline", "difffilter", "softmax", "static"):
        for seed in (1, 2, 3):
            run = layout.run_name(method, seed, None, 80)
            path = tmp_path / layout.metrics("tiny-qwen2", run)
            path.parent.mkdir(parents=True)
            _run(method, seed, np.linspace(0, 0.5, 12), np.full(12, 0.8)).drop(columns="model").to_parquet(path)
            write_provenance(tmp_path / layout.train_provenance("tiny-qwen2", run), {"run": run}, [path])
    result = _curves(tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    figure = tmp_path / "results/tables/embedded-default/figures/training_curves.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    edited = layout.metrics("tiny-qwen2", layout.run_name("softmax", 2, None, 80))
    _run("softmax", 2, np.linspace(0, 0.9, 12), np.full(12, 0.8)).drop(columns="model").to_parquet(tmp_path / edited)
    assert _curves(tmp_path).returncode != 0
    log = (tmp_path / "logs/tables/embedded-default_training_curves.log").read_text()
    assert "DamagedArtefactError: damaged input artefact:" in log
    assert f"{edited}: sha256 " in log and "(damaged or changed after it was written)" in log


def test_training_curves_in_default_targets_of_a_training_study_only(tmp_path):
    native = forked_snakemake.snakemake([*SNAKEFILE, "-n", "--configfile", "config/config.yaml", "--directory",
                                         str(tmp_path)], cwd=REPO)
    assert _jobs(native.stdout + native.stderr)["training_curves"] == 1
    if not RELEASED.is_file():
        pytest.skip(f"{RELEASED} not present")
    released = forked_snakemake.snakemake([*SNAKEFILE, "-n", "-F", "--configfile", "config/released.yaml"], cwd=REPO)
    assert released.returncode == 0, released.stderr[-3000:]
    assert _jobs(released.stdout + released.stderr) == {"tables": 1, "all": 1}
