"""A job that never touches a model starts without torch or transformers: each workflow script runs in a fresh process
(Snakemake's `script:`), and importing those two costs a job seconds (benchmarks/startup.py).

Each script runs in a subprocess without the `snakemake` object Snakemake injects, so it stops at its first use of
it, after its module-level imports; the probe then lists the model packages loaded.
"""
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODEL_PACKAGES = ("torch", "transformers")
MODEL_JOBS = {"base_model", "train", "score", "solve_rates", "merge"}
MODEL_FREE_JOBS = {"corpus", "benchmark_items", "quarantine_gate", "calibrate", "decontaminate", "parse_gate", "records",
                   "tables",
                   "training_curves", "selection_tables", "scenario_tables", "regime_corpus", "solve_rate_table", "audit"}
PROBE = """
import runpy, sys
try:
    runpy.run_path(sys.argv[1])
except NameError as error:
    assert error.name == "snakemake", error
else:
    raise SystemExit("the script never reached the snakemake object")
print(" ".join(m for m in sys.argv[2:] if m in sys.modules))
"""


def model_packages_loaded(script: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-c", PROBE, str(script), *MODEL_PACKAGES], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_every_workflow_script_is_classified():
    assert {path.stem for path in (REPO / "workflow_scripts").glob("*.py")} == MODEL_JOBS | MODEL_FREE_JOBS
    assert not MODEL_JOBS & MODEL_FREE_JOBS


@pytest.mark.parametrize("job", sorted(MODEL_FREE_JOBS))
def test_a_model_free_job_imports_neither_torch_nor_transformers(job):
    assert model_packages_loaded(REPO / "workflow_scripts" / f"{job}.py") == []


@pytest.mark.parametrize("source, loaded", [
    ("from dataflex_rl.backends.embedded.model import load_model\n", ["torch", "transformers"]),
    ("import torch\n", ["torch"]),
    # the backend is imported inside the job, not with the module
    ("from dataflex_rl.study.jobs import train_run\n", []),
])
def test_the_probe_sees_a_model_package_a_script_imports(tmp_path, source, loaded):
    script = tmp_path / "job.py"
    script.write_text(source + "with open(snakemake.log[0]):\n    pass\n")
    assert model_packages_loaded(script) == loaded
