"""Training survives a SIGKILL at every point of `dataflex_rl.training.faults`: the rerun ends bit-identical to a
straight run.

Each killed run is a process of its own that calls `train_run` with `DATAFLEX_FAULT` set and dies by SIGKILL. Importing
torch and transformers costs a new interpreter ~10 s of CPU, so one `python -c` process imports them once and forks a
child per case (before any torch op, so no thread pool is copied); each child sets the variable, trains and is
killed. Each test then reruns its case in this process without the fault, as a Snakemake retry or a Slurm requeue
would, and compares every weight tensor and every metric with one uninterrupted run of the same seed.
"""
import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from dataflex_rl.artefacts.train_state import load_train_state
from dataflex_rl.backends.embedded.model import load_model
from dataflex_rl.backends.embedded.trainer import train_run
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.training.faults import ENV, POINTS, FaultPlan
from dataflex_rl.training.recipe import GRPOSettings

from tiny_base import TEMPLATE, tiny_base

SEED = 1
# Checkpoints after steps 2 and 4 and at the end (5); a learning rate large enough that every update moves the weights.
SETTINGS = GRPOSettings(steps=5, prompts_per_step=4, rollouts=4, max_new_tokens=3, checkpoint_every=2,
                        learning_rate=1e-2)
METHODS = {
    "baseline": MethodSpec("baseline", "baseline", {}, Family.none),
    # a mixture with state (UCB counts and |advantage| windows) that steers the prompt stream's domain draws
    "dump_ucb": MethodSpec("dump_ucb", "dump_ucb", {}, Family.mixture),
    # a selection under its matched-random control
    "difffilter_random": MethodSpec("difffilter_random", "difffilter",
                                    {"low": 0.2, "high": 0.8, "control": "random", "seed": 3}, Family.selection),
}
# (method, fault, the checkpoint step the rerun resumes from, or None when no checkpoint exists yet)
CASES = [
    ("baseline", "after_rollouts:0", None),  # in the first step
    ("baseline", "step_start:3", 2),
    ("baseline", "after_rollouts:3", 2),
    ("baseline", "after_optimiser_step:4", 2),  # the update applied, its checkpoint not yet written
    ("baseline", "checkpoint_write:4", 2),
    ("baseline", "after_checkpoint:2", 2),
    ("baseline", "final_weights:5", 5),
    ("baseline", "after_final_weights:5", 5),
    ("dump_ucb", "after_optimiser_step:3", 2),
    ("difffilter_random", "checkpoint_write:4", 2),
]
WRITE_POINTS = ("checkpoint_write", "final_weights")  # the points that die in the middle of a file
# Reads one case per line ({"name", "fault", "args"}), runs each in a forked child, prints {name: exit status}.
FORK_SERVER = """
import json, os, sys, traceback
from dataflex_rl.backends.embedded.trainer import train_run
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.training.recipe import GRPOSettings
statuses = {}
for line in sys.stdin:
    case = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.environ["%s"] = case["fault"]
            args = case["args"]
            train_run(**{**args, "method": MethodSpec.from_job(args["method"]),
                         "settings": GRPOSettings(**args["settings"])})
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    statuses[case["name"]] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(statuses))
""" % ENV


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    # enough warm-up that sampled answers are sometimes right: non-degenerate groups, so updates carry PG signal
    tiny_base(root, WarmupSettings(steps=40, batch_size=16, learning_rate=1e-2), items_per_domain=20)
    return root


def run_args(root: Path, method: str, run_dir: Path) -> dict:
    return {"base_dir": str(root / "base"), "corpus_path": str(root / "corpus.parquet"),
            "method": asdict(METHODS[method]), "seed": SEED, "settings": asdict(SETTINGS), "template": TEMPLATE,
            "out_model": str(run_dir / "out" / "model"), "out_metrics": str(run_dir / "out" / "metrics.parquet"),
            "state_dir": str(run_dir / "state"), "threads": 1, "progress": False}


def train_in_process(args: dict) -> None:
    train_run(**{**args, "method": MethodSpec.from_job(args["method"]), "settings": GRPOSettings(**args["settings"])})


def case_dir(root: Path, method: str, fault: str) -> Path:
    return root / "cases" / f"{method}-{fault.replace(':', '-')}"


@pytest.fixture(scope="session")
def references(workspace):
    """One uninterrupted run per method: its final weights and metrics."""
    runs = {}
    for method in METHODS:
        args = run_args(workspace, method, workspace / "reference" / method)
        train_in_process(args)
        runs[method] = (load_file(Path(args["out_model"]) / "model.safetensors"), pd.read_parquet(args["out_metrics"]))
    return runs


@pytest.fixture(scope="session")
def killed(workspace):
    """Run every case with its fault; ({case name: exit status}, the processes' stderr)."""
    cases = [{"name": f"{method}-{fault}", "fault": fault,
              "args": run_args(workspace, method, case_dir(workspace, method, fault))} for method, fault, _ in CASES]
    env = {key: value for key, value in os.environ.items() if key != ENV}
    server = subprocess.run([sys.executable, "-c", FORK_SERVER], input="".join(json.dumps(c) + "\n" for c in cases),
                            env=env, capture_output=True, text=True, timeout=300)
    assert server.returncode == 0, server.stderr[-3000:]
    return json.loads(server.stdout.splitlines()[-1]), server.stderr


def leftovers(run_dir: Path) -> list[Path]:
    """Temporary files of interrupted atomic writes (`.<name>.*`) in the run's state and output directories."""
    return sorted(path for folder in (run_dir / "state", run_dir / "out") for path in folder.glob(".*"))


@pytest.mark.parametrize("method,fault,resume_step", CASES, ids=[f"{m}-{f}" for m, f, _ in CASES])
def test_killed_run_reruns_bit_identical_to_an_uninterrupted_run(workspace, references, killed, capfd, method,
                                                                  fault, resume_step):
    statuses, stderr = killed
    assert statuses[f"{method}-{fault}"] == -signal.SIGKILL, stderr[-3000:]
    run_dir = case_dir(workspace, method, fault)
    checkpoint = run_dir / "state" / "checkpoint.pt"
    if resume_step is None:
        assert not checkpoint.exists()
    else:
        assert load_train_state(checkpoint, checkpoint.parent)["step"] == resume_step
    partial = leftovers(run_dir)
    assert len(partial) == (1 if fault.split(":")[0] in WRITE_POINTS else 0), partial
    for path in partial:  # truly cut short, so a run that picked it up could not get further
        if path.is_dir():  # the final model's directory: weights written, tokenizer not
            assert (path / "model.safetensors").is_file() and not (path / "tokenizer.json").exists()
        else:
            with pytest.raises(RuntimeError):
                torch.load(path, weights_only=False)

    capfd.readouterr()
    train_in_process(run_args(workspace, method, run_dir))
    log = capfd.readouterr().err
    if resume_step is None:
        assert "resuming" not in log
    else:
        assert f"resuming from step {resume_step} of {checkpoint}" in log

    assert leftovers(run_dir) == []
    expected_weights, expected_metrics = references[method]
    weights = load_file(run_dir / "out" / "model" / "model.safetensors")
    assert list(weights) == list(expected_weights)
    for name, tensor in weights.items():
        assert torch.equal(tensor, expected_weights[name]), name
    metrics = pd.read_parquet(run_dir / "out" / "metrics.parquet")
    pd.testing.assert_frame_equal(metrics.drop(columns="seconds"), expected_metrics.drop(columns="seconds"),
                                  check_exact=True)


def test_reference_runs_learn_so_that_the_comparison_can_fail(workspace, references):
    """Rewards vary and every weight tensor moves away from the base model, for every method: a resume that lost the
    optimiser, a generator, the prompt stream or the mixture would change the final state."""
    base, _ = load_model(workspace / "base")
    for method, (weights, metrics) in references.items():
        assert metrics["mean_reward"].gt(0).any() and metrics["kept_fraction"].gt(0).any(), method
        moved = [name for name, tensor in weights.items() if not torch.equal(tensor, base.state_dict()[name])]
        assert len(moved) == len(weights), (method, sorted(set(weights) - set(moved)))
    assert references["dump_ucb"][1]["p:math"].nunique() > 1  # the mixture's state steers the draws


@pytest.mark.parametrize("text", ["checkpoint:x", "after_checkpoint:2:pause", "after_checkpoint:2:hang:3"])
def test_a_malformed_fault_plan_is_refused(monkeypatch, text):
    monkeypatch.setenv(ENV, text)
    with pytest.raises(ValueError, match=f"{ENV}='{text}' is not <point>:<step>\\[:hang\\]; point is one of "
                                         f"{POINTS[0]}"):
        FaultPlan.from_environment()


def test_a_hang_stops_the_process_at_its_point_until_a_signal_ends_it():
    """What a scheduler's time limit, scancel or requeue meets (tests/test_slurm_cluster.py): a process that neither
    exits nor dies by itself, and ends on SIGTERM."""
    script = ("from dataflex_rl.training.faults import FaultPlan\n"
              "plan = FaultPlan.from_environment()\n"
              "plan.reached('after_checkpoint', 1)\n"
              "plan.reached('after_checkpoint', 2)\n"
              "print('passed the point')\n")
    process = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, ENV: "after_checkpoint:2:hang"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stderr.readline() == f"{ENV}: stopped at after_checkpoint of step 2 until killed\n"
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=1)
    process.terminate()
    stdout, _ = process.communicate(timeout=10)
    assert process.returncode == -signal.SIGTERM and stdout == ""

