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
