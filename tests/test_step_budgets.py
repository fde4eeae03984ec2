"""Step budgets of one training line share its state: a longer budget continues the shorter one's checkpoint and
ends where a straight run ends, bit for bit; a shorter budget rebuilt after a longer one continued the line gets its own
end of training back (the kept budget checkpoint), not the longer run's."""
import pandas as pd
import pytest
import torch

from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.methods import MethodSpec
from dataflex_rl.recipe import GRPOSettings
from tiny_base import TEMPLATE, tiny_base


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("budgets")
    return root, tiny_base(root, WarmupSettings(steps=5, batch_size=8), items_per_domain=30)


def _train(tiny, state_dir, steps):
    root, corpus = tiny
    settings = GRPOSettings(steps=steps, prompts_per_step=4, rollouts=5, max_new_tokens=4, checkpoint_every=2)
    trainer = EmbeddedGRPOTrainer(root / "base", corpus, MethodSpec("difffilter", "difffilter", {}, "selection"), 3,
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
    assert short.threads == 1 and torch.load(line / "checkpoint.pt", weights_only=False)["threads"] == 1
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
    assert torch.load(line / "checkpoint.pt", weights_only=False)["step"] == 3  # the refused resume wrote nothing


def test_a_checkpoint_without_a_thread_count_resumes_with_the_jobs_count(tiny, tmp_path, capfd):
    """A state folder written before checkpoints recorded their thread count resumes, saying so."""
    line = tmp_path / "line"
    _train(tiny, line, steps=3)
    state = torch.load(line / "checkpoint.pt", weights_only=False)
    del state["threads"]
    torch.save(state, line / "checkpoint.pt")
    long, _ = _train(tiny, line, steps=4)
    assert "records no thread count" in capfd.readouterr().err
    assert long.threads == 1 and torch.load(line / "checkpoint.pt", weights_only=False)["threads"] == 1
