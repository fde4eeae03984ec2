"""A train job's lock on its run's state folder (dataflex_rl/artefacts/state_lock.py), between real processes: a
second one is refused while the first holds it, and granted once the first is killed with SIGKILL."""
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dataflex_rl.artefacts.state_lock import StateLockedError, held_state

REPO = Path(__file__).resolve().parents[1]

HOLDER = textwrap.dedent("""
    import sys, time
    from dataflex_rl.artefacts.state_lock import held_state
    with held_state(sys.argv[1]):
        print("held", flush=True)
        time.sleep(600)
""")


def _holder(state):
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(state)], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_job_is_refused_while_the_first_holds_the_state_and_granted_once_it_is_killed(tmp_path):
    state = tmp_path / "runs" / "state"
    first = _holder(state)
    try:
        with pytest.raises(StateLockedError) as refused:
            with held_state(state):
                pytest.fail("the lock was granted while another process held it")
        message = str(refused.value)
        assert message.startswith(f"{state}: another train job holds this run's state folder (pid {first.pid} on ")
        assert "--unlock" in message and "rerun" in message
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    with held_state(state) as held:  # the kernel released the dead process's lock: no stale lock blocks a rerun
        assert held == state
        assert (state / ".lock").read_text().startswith(f"pid {os.getpid()} on ")


def test_a_train_job_is_refused_before_it_trains_while_another_holds_its_state(tmp_path):
    """The train rule's entry point (dataflex_rl.study.jobs.train_run, which both backends' train jobs run) takes the
    lock of its `state_dir` before its backend starts: nothing is trained or written."""
    import pandas as pd

    from dataflex_rl.study.jobs import train_run

    corpus = tmp_path / "corpus.parquet"
    pd.DataFrame([{"id": "a", "prompt": "1", "answer": "1"}]).to_parquet(corpus)
    job = {"model": {"backend": "embedded"}, "template": "{question}", "seed": 1, "training": {"steps": 1},
           "method": {"name": "baseline", "policy": "baseline", "params": {}, "family": "none"}}
    state = tmp_path / "run" / "state"
    first = _holder(state)
    try:
        with pytest.raises(StateLockedError, match=f"{state}: another train job holds"):
            train_run(job, {"seed": 1}, base=None, corpus=corpus, checkpoint_every=1,
                      out_model=tmp_path / "run/model", out_metrics=tmp_path / "run/metrics.parquet",
                      out_provenance=tmp_path / "run/provenance.json", state_dir=state)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["state"]
    assert sorted(p.name for p in state.iterdir()) == [".lock"]


@pytest.mark.slow
def test_snakemake_fails_a_train_job_whose_state_another_holds_and_reruns_it_once_the_holder_is_killed(
        smoke_study_copy):
    """Through real Snakemake on the finished smoke study: one run's training forced while another process holds its
    state folder fails, naming the folder; once the holder is killed (SIGKILL), the same command trains it."""
    from dataflex_rl.artefacts import layout

    run = "full/baseline/seed1/steps3"
    state = smoke_study_copy / layout.train_state("tiny-qwen2", run)
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-f",
               layout.run_model("tiny-qwen2", run), "--allowed-rules", "train", "--cores", "1",
               "--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(smoke_study_copy)]
    first = _holder(state)
    try:
        refused = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert refused.returncode != 0
    log = (smoke_study_copy / f"logs/train/tiny-qwen2/{run}.log").read_text()
    assert f"StateLockedError: {layout.train_state('tiny-qwen2', run)}: another train job holds this run's state " \
           f"folder (pid {first.pid} on " in log
    rerun = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
