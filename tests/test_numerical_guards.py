"""A non-finite batch stops training with a FloatingPointError that names the step and the batch, after the state
before that step is checkpointed; the bad update is never applied, and a rerun resumes cleanly."""
import math

import pandas as pd
import pytest
import torch

from dataflex_rl.artefacts.train_state import load_train_state
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.training.recipe import GRPOSettings

from tiny_base import TEMPLATE, tiny_base

METHOD = MethodSpec("dump_ucb", "dump_ucb", {}, Family.mixture)  # a mixture, so the rewound state includes its own


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("guards")
    return root, tiny_base(root, WarmupSettings(steps=40, batch_size=16, learning_rate=1e-2), 20)


def trainer(workspace, steps: int, learning_rate: float = 1e-2) -> EmbeddedGRPOTrainer:
    root, corpus = workspace
    settings = GRPOSettings(steps=steps, prompts_per_step=4, rollouts=4, max_new_tokens=3, checkpoint_every=2,
                            learning_rate=learning_rate)
    return EmbeddedGRPOTrainer(root / "base", corpus, METHOD, 1, settings, TEMPLATE)


def assert_same(a, b, where="checkpoint"):
    """Exact equality of two checkpoint trees (tensors, dicts, lists, tuples, numbers)."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{index}]")
    else:
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), where


@pytest.fixture(scope="module")
def straight(workspace, tmp_path_factory):
    """One uninterrupted 5-step run: (metrics without wall-clock seconds, final weights)."""
    run = trainer(workspace, steps=5)
    metrics = run.train(tmp_path_factory.mktemp("straight"), progress=False).drop(columns="seconds")
    return metrics, run.model.state_dict()


def assert_resumes_to(straight, workspace, state):
    resumed = trainer(workspace, steps=5)
    got = resumed.train(state, progress=False).drop(columns="seconds")
    metrics, weights = straight
    pd.testing.assert_frame_equal(got, metrics, check_exact=True)
    for name, tensor in weights.items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), name


def poison_reference(run: EmbeddedGRPOTrainer, value: float) -> None:
    """A non-finite weight in the frozen reference model reaches the loss through the KL term."""
    with torch.no_grad():
        run.reference.model.norm.weight[0] = value


STATISTICS = ("mean reward ", "group reward std min/mean/max ", "mean response length ", "kept fraction 1, ",
              "loss not reached", "grad norm not reached")


def test_nan_loss_checkpoints_the_state_before_the_step_and_a_clean_rerun_resumes_from_it(workspace, straight,
                                                                                         tmp_path):
    state = tmp_path / "state"
    trainer(workspace, steps=3).train(state, progress=False)
    before = load_train_state(state / "checkpoint.pt", state)

    poisoned = trainer(workspace, steps=5)
    poison_reference(poisoned, float("nan"))
    with pytest.raises(FloatingPointError) as raised:
        poisoned.train(state, progress=False)
    message = str(raised.value)
    assert message.startswith("step 3: GRPO loss is not finite (nan); refusing to take the step. Batch: mean reward ")
    assert all(statistic in message for statistic in STATISTICS), message
    assert raised.value.__notes__ == [f"The update was not applied; {state / 'checkpoint.pt'} holds the state before "
                                      "step 3, and a rerun resumes from it."]

    # rewritten by the guard, yet exactly the state after step 3: weights, optimiser, RNGs, stream, mixture, metrics
    after = load_train_state(state / "checkpoint.pt", state)
    assert after["step"] == 3
    assert_same(after, before)
    assert_resumes_to(straight, workspace, state)


def test_inf_in_the_first_step_checkpoints_the_initial_state(workspace, straight, tmp_path):
    poisoned = trainer(workspace, steps=5)
    poison_reference(poisoned, float("inf"))
    with pytest.raises(FloatingPointError, match=r"^step 0: GRPO loss is not finite \(nan\)") as raised:
        poisoned.train(tmp_path / "state", progress=False)
    assert all(statistic in str(raised.value) for statistic in STATISTICS)
    assert load_train_state(tmp_path / "state" / "checkpoint.pt", tmp_path / "state")["step"] == 0
    assert_resumes_to(straight, workspace, tmp_path / "state")
