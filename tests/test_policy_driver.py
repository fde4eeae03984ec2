"""The backend-neutral policy driver: roles by family, the prompt stream steered by a mixture, the loss inputs of a
selection, the metrics it names and the state it checkpoints. Expected values are worked out by hand."""
import pytest
import torch

from dataflex_rl.training.grpo import group_advantages
from dataflex_rl.policies.driver import PolicyDriver
from dataflex_rl.policies.methods import MethodSpec
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


def test_the_family_role_decides_what_the_driver_builds():
    round_ = {"candidates_per_round": 4, "selection_ratio": 2, "validation_size": 2}
    selection = PolicyDriver(MethodSpec("gradalign", "gradalign", round_, Family.prompt_selection), DOMAINS, seed=1)
    assert selection.needs_probe and selection.selector and selection.mixture is None
    assert selection.score_temperature(0.9) == 0.9  # unset: the training temperature
    hotter = {**round_, "score_temperature": 1.3}
    assert PolicyDriver(MethodSpec("gradalign", "gradalign", hotter, Family.prompt_selection), DOMAINS,
                        seed=1).score_temperature(0.9) == 1.3
    mixture = PolicyDriver(MethodSpec("static", "static", {}, Family.mixture), DOMAINS, seed=1)
    assert not mixture.needs_probe and mixture.mixture and mixture.selector is None
    assert mixture.response_policy.name == "baseline"  # the responses are kept as sampled
    response = PolicyDriver(MethodSpec("topk", "topk", {}, Family.selection), DOMAINS, seed=1)
    assert (response.needs_probe, response.mixture, response.selector) == (False, None, None)
    assert response.response_policy.name == "topk"


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
