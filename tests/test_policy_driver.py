"""The backend-neutral policy driver: roles by family, the prompt stream steered by a mixture, the loss inputs of a
selection, the metrics it names and the state it checkpoints. Expected values are worked out by hand."""
import pytest
import torch

from dataflex_rl.grpo import group_advantages
from dataflex_rl.policy_driver import PolicyDriver
from dataflex_rl.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family

DOMAINS = ["math"] * 6 + ["logic"] * 3 + ["science"] * 3  # corpus rows: shares 1/2, 1/4, 1/4


def _batch(rewards):
    rewards = torch.tensor(rewards, dtype=torch.float32)
    mask = torch.ones(*rewards.shape, 3)
    return rewards, mask, group_advantages(rewards)[..., None] * mask, torch.zeros_like(mask)


def test_a_selection_drops_the_degenerate_group_from_pg_and_kl_and_names_its_metrics():
    driver = PolicyDriver(MethodSpec("difffilter", "difffilter", {}, Family.selection), DOMAINS, seed=3)
    assert driver.mixture is None
    rows = driver.draw(2)
    assert len(rows) == 2 and all(0 <= r < len(DOMAINS) for r in rows)
    # group 0 solves 2 of 5 (q = 0.4: kept), group 1 solves all (q = 1: dropped)
    rewards, mask, advantages, old = _batch([[1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
    loss = driver.weigh(rewards, mask, advantages, old, ["math", "logic"], ["a", "b"])
    assert torch.equal(loss.pg[0], mask[0]) and torch.equal(loss.pg[1], torch.zeros_like(mask[1]))
    assert torch.equal(loss.kl, loss.pg)  # paper semantics: a dropped response loses its KL term too
    assert torch.equal(loss.advantages, advantages)
    metrics = driver.metrics(loss)
    assert metrics.pop("mean_reward") == pytest.approx(0.7)  # 7 of 10 responses, in float32
    assert metrics == {"degenerate_group_fraction": 0.5, "kept_fraction": 0.5, "all_dropped": False,
                       "p:logic": 0.25, "p:math": 0.5, "p:science": 0.25}


def test_a_mixture_steers_the_stream_and_keeps_every_response():
    weights = {"math": 0.0, "logic": 1.0, "science": 0.0}
    driver = PolicyDriver(MethodSpec("static", "static", {"weights": weights}, Family.mixture), DOMAINS, seed=3)
    rows = driver.draw(4)
    assert [DOMAINS[r] for r in rows] == ["logic"] * 4
    rewards, mask, advantages, old = _batch([[1, 0, 0, 0, 0]] * 4)
    loss = driver.weigh(rewards, mask, advantages, old, ["logic"] * 4, ["a", "b", "c", "d"])
    assert torch.equal(loss.pg, mask) and loss.weights.kept_fraction == 1.0
    assert {k: v for k, v in driver.metrics(loss).items() if k.startswith("p:")} == {
        "p:logic": 1.0, "p:math": 0.0, "p:science": 0.0}


@pytest.mark.parametrize("method", [MethodSpec("dump_ucb", "dump_ucb", {}, Family.mixture),
                                    MethodSpec("baseline", "baseline", {}, Family.none)])
def test_the_state_restores_the_draws(method):
    driver = PolicyDriver(method, DOMAINS, seed=5)
    rewards, mask, advantages, old = _batch([[1, 0, 1, 0, 0]] * 3)
    for _ in range(3):
        rows = driver.draw(3)
        driver.observe(driver.weigh(rewards, mask, advantages, old, [DOMAINS[r] for r in rows], list("abc")).batch)
    state = driver.state_dict()
    ahead = [driver.draw(3) for _ in range(4)]
    restored = PolicyDriver(method, DOMAINS, seed=5)
    restored.load_state_dict(state)
    assert [restored.draw(3) for _ in range(4)] == ahead
