"""Step budgets of one training line share its state: a longer budget continues the shorter one's checkpoint and
ends where a straight run ends, bit for bit; a shorter budget rebuilt after a longer one continued the line gets its own
end of training back (the kept budget checkpoint), not the longer run's."""
import re

import pandas as pd
import pytest
import torch

from dataflex_rl.artefacts.train_state import UntrustedStateError, load_train_state
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.training.recipe import GRPOSettings
from pickle_payload import write_payload
from tiny_base import TEMPLATE, tiny_base


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("budgets")
    return root, tiny_base(root, WarmupSettings(steps=5, batch_size=8), items_per_domain=30)


def _train(tiny, state_dir, steps):
    root, corpus = tiny
    settings = GRPOSettings(steps=steps, prompts_per_step=4, rollouts=5, max_new_tokens=4, checkpoint_every=2)
    trainer = EmbeddedGRPOTrainer(root / "base", corpus, MethodSpec("difffilter", "difffilter", {}, Family.selection), 3,
                                  settings, TEMPLATE)
    metrics = trainer.train(state_dir, progress=False).drop(columns="seconds")
    return trainer, metrics


def _same_weights(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))


def test_a_longer_budget_continues_and_a_shorter_one_is_rebuilt_from_its_own_end(tiny, tmp_path, capfd):
    straight, straight_metrics = _train(tiny, tmp_path / "straight", steps=5)
    short, short_metrics = _train(tiny, tmp_path / "line", steps=3)
    long, long_metrics = _train(tiny, tmp_path / "line", steps=5)
    assert "resuming from step 3 of" in capfd.readouterr().err
    pd.testing.assert_frame_equal(long_metrics, straight_metrics)
    assert _same_weights(long, straight)
    assert sorted(p.name for p in (tmp_path / "line").glob("budget*.pt")) == ["budget3.pt", "budget5.pt"]

    again, again_metrics = _train(tiny, tmp_path / "line", steps=3)  # e.g. its outputs were deleted
    assert "budget3.pt" in capfd.readouterr().err
    pd.testing.assert_frame_equal(again_metrics, short_metrics)  # 3 steps: not the 5-step state
    assert _same_weights(again, short)


def test_a_line_continued_under_another_thread_count_is_refused(tiny, tmp_path):
    """The checkpoint records the thread count its steps were trained with: a longer budget under another count is
    refused, naming the state folder and both counts; rebuilding the finished shorter budget trains nothing, so any
    count may do it, and it reports the recorded count."""
    line = tmp_path / "line"
    short, short_metrics = _train(tiny, line, steps=3)  # tiny_base trains with 1 thread
    assert short.threads == 1 and load_train_state(line / "checkpoint.pt", line)["threads"] == 1
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match=rf"training state {line} was trained with 1 thread\(s\) up to step 3, "
                                               r"and this job has 2: .* delete .* to train the run afresh with 2"):
            _train(tiny, line, steps=5)
        again, again_metrics = _train(tiny, line, steps=3)
    finally:
        torch.set_num_threads(1)
    assert again.threads == 1
    pd.testing.assert_frame_equal(again_metrics, short_metrics)
    assert load_train_state(line / "checkpoint.pt", line)["step"] == 3  # the refused resume wrote nothing


def test_a_checkpoint_without_a_thread_count_resumes_with_the_jobs_count(tiny, tmp_path, capfd):
    """A state folder written before checkpoints recorded their thread count resumes, saying so."""
    line = tmp_path / "line"
    _train(tiny, line, steps=3)
    state = load_train_state(line / "checkpoint.pt", line)
    del state["threads"]
    torch.save(state, line / "checkpoint.pt")
    long, _ = _train(tiny, line, steps=4)
    assert "records no thread count" in capfd.readouterr().err
    assert long.threads == 1 and load_train_state(line / "checkpoint.pt", line)["threads"] == 1


def _truncate(path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def test_an_unreadable_checkpoint_is_named_set_aside_and_an_earlier_state_is_used(tiny, tmp_path, capfd):
    """A truncated latest checkpoint neither blocks rebuilding a shorter budget whose own kept end is intact nor
    changes a longer run: it falls back to that kept end and ends bit-identical to a straight run; with no readable
    state at all the run starts afresh, saying so, and ends as a fresh run does."""
    straight, straight_metrics = _train(tiny, tmp_path / "straight", steps=5)
    short, short_metrics = _train(tiny, tmp_path / "line", steps=3)
    _train(tiny, tmp_path / "line", steps=5)
    capfd.readouterr()
    checkpoint = tmp_path / "line" / "checkpoint.pt"
    _truncate(checkpoint)  # a hard link of budget5.pt since the 5-step run ended: both are damaged

    again, again_metrics = _train(tiny, tmp_path / "line", steps=3)
    log = capfd.readouterr().err
    assert f"{checkpoint}: unreadable checkpoint (" in log and "set aside as checkpoint.pt.unreadable" in log
    assert f"resuming from step 3 of {tmp_path / 'line' / 'budget3.pt'}" in log
    pd.testing.assert_frame_equal(again_metrics, short_metrics)
    assert _same_weights(again, short)

    long, long_metrics = _train(tiny, tmp_path / "line", steps=5)  # its kept end is damaged too: from step 3 on
    log = capfd.readouterr().err
    assert "budget5.pt: unreadable checkpoint (" in log and "resuming from step 3 of" in log
    pd.testing.assert_frame_equal(long_metrics, straight_metrics)
    assert _same_weights(long, straight)
    assert sorted(p.name for p in (tmp_path / "line").iterdir()) == [
        "budget3.pt", "budget5.pt", "budget5.pt.unreadable", "checkpoint.pt", "checkpoint.pt.unreadable"]

    _truncate(tmp_path / "line" / "checkpoint.pt")  # now also budget5.pt's, and budget3.pt's own bytes
    _truncate(tmp_path / "line" / "budget3.pt")
    fresh, fresh_metrics = _train(tiny, tmp_path / "line", steps=3)
    log = capfd.readouterr().err
    assert "starting afresh" in log and "resuming" not in log
    pd.testing.assert_frame_equal(fresh_metrics, short_metrics)
    assert _same_weights(fresh, short)


def test_a_checkpoint_that_would_run_code_is_refused_and_left_in_place(tiny, tmp_path):
    """The states the trainer writes read back without code execution (its resume: the tests above); a
    checkpoint.pt replaced by one whose object calls `Path.touch` when unpickled is refused before anything of it
    runs, naming the file and the state folder to delete, and neither it nor the kept budget3.pt is set aside or
    removed (docs/refusals.md, "Train states from elsewhere")."""
    line, marker = tmp_path / "line", tmp_path / "ran"
    _train(tiny, line, steps=3)
    state = load_train_state(line / "budget3.pt", line)
    assert state["step"] == 3 and len(state["metrics"]) == 3 and state["optimiser"]["state"]
    write_payload(line / "checkpoint.pt", marker, step=3)
    payload = (line / "checkpoint.pt").read_bytes()
    with pytest.raises(UntrustedStateError, match=re.escape(f"{line / 'checkpoint.pt'}: refused to load this train "
                                                            f"state")) as refused:
        _train(tiny, line, steps=5)
    assert f"delete {line}." in str(refused.value)
    assert not marker.exists()
    assert sorted(p.name for p in line.iterdir()) == ["budget3.pt", "checkpoint.pt"]
    assert (line / "checkpoint.pt").read_bytes() == payload
    assert load_train_state(line / "budget3.pt", line)["step"] == 3
