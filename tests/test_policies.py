"""Data policies on hand-built batches; every expected value is worked out in the comments."""
import json
import math

import pytest
import torch

from dataflex_rl.training.grpo import grpo_loss
from dataflex_rl.policies import GroupBatch, build_mixture, build_response_policy, list_policies
from dataflex_rl.policies.weights import reweighting_weights, selection_weights

LN3 = math.log(3.0)


def make_batch(rewards, lengths, max_len, response_adv=None, domains=None):
    """A batch whose token advantages equal one value per response on its valid tokens (0 on padding)."""
    rewards = torch.tensor(rewards, dtype=torch.float32)
    lengths = torch.tensor(lengths, dtype=torch.float32)
    mask = (torch.arange(max_len)[None, None, :] < lengths[..., None]).float()
    adv = torch.zeros_like(rewards) if response_adv is None else torch.tensor(response_adv, dtype=torch.float32)
    groups = rewards.shape[0]
    return GroupBatch(
        rewards=rewards, lengths=lengths, token_mask=mask, advantages=adv[..., None] * mask,
        old_logprobs=torch.full_like(mask, math.log(0.5)) * mask,
        domains=tuple(domains or ["math"] * groups), prompt_ids=tuple(f"p{g}" for g in range(groups)),
    )


# --- the batch and its signals ------------------------------------------------------------------------------------

def test_group_batch_validates_shapes_and_lengths():
    good = make_batch([[1.0, 0.0]], [[2, 1]], 3)
    with pytest.raises(ValueError, match="lengths must equal"):
        GroupBatch(good.rewards, torch.tensor([[2.0, 2.0]]), good.token_mask, good.advantages, good.old_logprobs,
                   good.domains, good.prompt_ids)
    with pytest.raises(ValueError, match="advantages"):
        GroupBatch(good.rewards, good.lengths, good.token_mask, good.advantages[..., :2], good.old_logprobs,
                   good.domains, good.prompt_ids)
    with pytest.raises(ValueError, match="domains"):
        GroupBatch(good.rewards, good.lengths, good.token_mask, good.advantages, good.old_logprobs,
                   ("math", "logic"), good.prompt_ids)


def test_signals_by_hand():
    batch = make_batch([[1.0, 0.5, 0.0, 0.8]], [[2, 4, 1, 0]], 4, response_adv=[[1.5, -0.5, 0.0, 9.0]])
    # Solved iff r > 0.5: 1, 0.5 (no), 0, 0.8 → 2/4 = 0.5.
    torch.testing.assert_close(batch.solve_rate(), torch.tensor([0.5]))
    # Mean |A| over each response's own tokens; the empty response gives 0, not NaN.
    torch.testing.assert_close(batch.mean_abs_advantage(), torch.tensor([[1.5, 0.5, 0.0, 0.0]]))
    # r/L: 1/2, 0.5/4, 0/1, 0.8/max(0, 1).
    torch.testing.assert_close(batch.efficiency(), torch.tensor([[0.5, 0.125, 0.0, 0.8]]))
    # π = exp(log 0.5) = 0.5 on valid tokens, 0 on padding.
    torch.testing.assert_close(batch.token_prob(), 0.5 * batch.token_mask)


# --- selection ----------------------------------------------------------------------------------------------------

def test_difffilter_keeps_strictly_inside_the_band():
    # Solved counts per group of K=5: 0, 1, 2, 3, 4, 5 → q = 0, 0.2, 0.4, 0.6, 0.8, 1.0.
    rewards = [[1.0] * n + [0.0] * (5 - n) for n in range(6)]
    batch = make_batch(rewards, [[2] * 5] * 6, 3)
    weights = build_response_policy("difffilter", {}).weigh(batch)
    # 0.2 and 0.8 are boundaries and excluded: only q = 0.4 and 0.6 survive → 10 of 30 responses.
    kept_groups = weights.pg.sum(dim=(1, 2)) > 0
    assert kept_groups.tolist() == [False, False, True, True, False, False]
    torch.testing.assert_close(weights.pg, weights.kl)  # a drop removes PG and KL
    torch.testing.assert_close(weights.pg[2], batch.token_mask[2])
    assert weights.kept_fraction == pytest.approx(10 / 30)
    # make_batch's advantages are all zero, so every kept response is logged as carrying no PG signal.
    assert weights.info == {"all_dropped": False, "kept_responses": 10, "kept_groups": 2, "single_kept_groups": 0,
                            "zero_advantage_kept": 10}
    assert weights.advantages is None  # difffilter keeps the batch's advantages
    # A wider band (0.1, 0.9) also keeps q = 0.2 and 0.8 → 4 groups, 20 of 30 responses.
    wide = build_response_policy("difffilter", {"low": 0.1, "high": 0.9}).weigh(batch)
    assert wide.kept_fraction == pytest.approx(20 / 30)


def test_selection_dropping_everything_gives_zero_weights_and_a_zero_loss():
    batch = make_batch([[0.0, 0.0], [1.0, 1.0]], [[2, 1], [1, 2]], 2)  # q = 0 and 1: both outside the band
    weights = build_response_policy("difffilter", {}).weigh(batch)
    assert weights.kept_fraction == 0.0 and weights.info["all_dropped"] is True
    assert torch.count_nonzero(weights.pg) == 0 and torch.count_nonzero(weights.kl) == 0
    logp = torch.full_like(batch.token_mask, -1.0, requires_grad=True)
    loss, _ = grpo_loss(logp, logp.detach(), logp.detach() + 1.0, batch.advantages, batch.token_mask,
                        weights.pg, weights.kl)
    assert loss.item() == 0.0  # never NaN


def test_selection_can_keep_kl_as_the_released_code_did():
    batch = make_batch([[0.0, 0.0]], [[2, 1]], 2)
    weights = build_response_policy("difffilter", {"drop_kl": False}).weigh(batch)
    assert torch.count_nonzero(weights.pg) == 0
    torch.testing.assert_close(weights.kl, batch.token_mask)


def test_selection_mask_must_be_binary():
    with pytest.raises(ValueError, match="0 and 1"):
        selection_weights(torch.tensor([[0.5, 1.0]]), torch.ones(1, 2, 3))


# --- reweighting --------------------------------------------------------------------------------------------------

def test_softmax_weights_by_hand():
    # a = mean |A| = 0 and ln3 → exp(a/1) = 1 and 3 → softmax 0.25, 0.75 (lengths 1 and 3).
    batch = make_batch([[1.0, 0.0]], [[1, 3]], 3, response_adv=[[0.0, LN3]])
    raw = build_response_policy("softmax", {"normalize": "none"}).weigh(batch)
    torch.testing.assert_close(raw.pg, torch.tensor([[[0.25, 0.0, 0.0], [0.75, 0.75, 0.75]]]))
    torch.testing.assert_close(raw.kl, batch.token_mask)  # reweighting leaves the KL term alone
    # Batch mean over the 4 valid tokens: (0.25 + 3·0.75)/4 = 0.625 → 0.25/0.625 = 0.4, 0.75/0.625 = 1.2.
    normed = build_response_policy("softmax", {}).weigh(batch)
    torch.testing.assert_close(normed.pg, torch.tensor([[[0.4, 0.0, 0.0], [1.2, 1.2, 1.2]]]))
    assert (normed.pg.sum() / batch.token_mask.sum()).item() == pytest.approx(1.0)
    assert normed.kept_fraction == 1.0 and normed.info == {"degenerate_weights": False}
    # T = 0.5: exp(2a) = 1 and 9 → 0.1, 0.9.
    sharp = build_response_policy("softmax", {"temperature": 0.5, "normalize": "none"}).weigh(batch)
    torch.testing.assert_close(sharp.pg[0, :, 0], torch.tensor([0.1, 0.9]))


def test_softmax_runs_over_the_whole_batch_not_per_group():
    # Two groups of one response each: a per-group softmax would give 1 and 1; the batch softmax gives 0.25, 0.75.
    batch = make_batch([[1.0], [0.0]], [[1], [1]], 1, response_adv=[[0.0], [LN3]])
    weights = build_response_policy("softmax", {"normalize": "none"}).weigh(batch)
    torch.testing.assert_close(weights.pg.flatten(), torch.tensor([0.25, 0.75]))


def test_softmax_with_all_zero_advantages_is_uniform():
    batch = make_batch([[1.0, 1.0], [0.0, 0.0]], [[2, 1], [3, 1]], 3)
    weights = build_response_policy("softmax", {}).weigh(batch)
    torch.testing.assert_close(weights.pg, batch.token_mask)


def test_batch_mean_normalisation_of_token_weights():
    mask = torch.tensor([[[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]])
    raw = torch.tensor([[[2.0, 0.0, 7.0], [1.0, 5.0, 5.0]]])  # padding values must not count
    # Valid tokens carry 2, 0, 1 → mean 1 → already mean 1; padding zeroed. Response 0 keeps a positive weight.
    out = reweighting_weights(raw, mask)
    torch.testing.assert_close(out.pg, torch.tensor([[[2.0, 0.0, 0.0], [1.0, 0.0, 0.0]]]))
    # Scaling the raw weights by 10 changes nothing after normalisation.
    torch.testing.assert_close(reweighting_weights(10 * raw, mask).pg, out.pg)


def test_all_zero_weights_fall_back_to_uniform():
    mask = torch.tensor([[[1.0, 1.0], [1.0, 0.0]]])
    out = reweighting_weights(torch.zeros(1, 2), mask)
    torch.testing.assert_close(out.pg, mask)
    assert out.info["degenerate_weights"] is True and out.kept_fraction == 1.0


def test_reweighting_rejects_negative_weights_and_unknown_normalisation():
    mask = torch.ones(1, 2, 2)
    with pytest.raises(ValueError, match="non-negative"):
        reweighting_weights(torch.tensor([[1.0, -1.0]]), mask)
    with pytest.raises(ValueError, match="batch_mean"):
        build_response_policy("softmax", {"normalize": "sum"})


def test_baseline_weighs_every_valid_token_by_one():
    batch = make_batch([[1.0, 0.0]], [[1, 3]], 3)
    weights = build_response_policy("baseline", {}).weigh(batch)
    torch.testing.assert_close(weights.pg, batch.token_mask)
    torch.testing.assert_close(weights.kl, batch.token_mask)
    assert weights.kept_fraction == 1.0


# --- mixtures -----------------------------------------------------------------------------------------------------

DOMAINS = ["math", "logic", "science"]


def test_static_mixture_probabilities():
    assert build_mixture("static", DOMAINS, {}).probabilities() == pytest.approx(
        {"math": 1 / 3, "logic": 1 / 3, "science": 1 / 3})
    # 2 : 1 : 1 → 0.5, 0.25, 0.25; feedback does not move it.
    mix = build_mixture("static", DOMAINS, {"weights": {"math": 2.0, "logic": 1.0, "science": 1.0}})
    mix.observe(make_batch([[0.0, 0.0]], [[1, 1]], 1, domains=["logic"]))
    assert mix.probabilities() == pytest.approx({"math": 0.5, "logic": 0.25, "science": 0.25})
    with pytest.raises(ValueError, match="exactly the domains"):
        build_mixture("static", DOMAINS, {"weights": {"math": 1.0}})


# T chosen so that a gap difference of 0.375 is a logit difference of ln 3.
REWARD_GAP_PARAMS = {"decay": 0.5, "temperature": 0.375 / LN3, "min_prob": 0.1}


def _reward_gap_after_feedback():
    mix = build_mixture("reward_gap", ["math", "logic"], REWARD_GAP_PARAMS)
    assert mix.probabilities() == pytest.approx({"math": 0.5, "logic": 0.5})  # both start at ema 0.5
    # Step 1: math group mean 1 → ema 0.5·0.5 + 0.5·1 = 0.75; logic group mean 0 → 0.5·0.5 + 0 = 0.25.
    mix.observe(make_batch([[1.0, 1.0], [0.0, 0.0]], [[1, 1], [1, 1]], 1, domains=["math", "logic"]))
    # Step 2: math group mean 0.5 → 0.5·0.75 + 0.5·0.5 = 0.625; logic unobserved, stays 0.25.
    mix.observe(make_batch([[1.0, 0.0]], [[1, 1]], 1, domains=["math"]))
    return mix


def test_reward_gap_after_a_hand_computed_feedback_sequence():
    mix = _reward_gap_after_feedback()
    assert mix.state_dict()["ema"] == pytest.approx({"math": 0.625, "logic": 0.25})
    # Gaps 1 − ema: 0.375 and 0.75 → logits differ by 0.375/T = ln 3 → softmax 1/4, 3/4.
    # Floor: p = 0.1 + (1 − 2·0.1)·softmax = 0.1 + 0.8·(0.25, 0.75) = 0.3, 0.7. The lagging domain (logic) is favoured.
    assert mix.probabilities() == pytest.approx({"math": 0.3, "logic": 0.7})


def test_mixture_state_dict_round_trips_through_json():
    mix = _reward_gap_after_feedback()
    restored = build_mixture("reward_gap", ["math", "logic"], REWARD_GAP_PARAMS)
    restored.load_state_dict(json.loads(json.dumps(mix.state_dict())))
    assert restored.probabilities() == pytest.approx(mix.probabilities())
    assert restored.state_dict() == mix.state_dict()
    other = build_mixture("reward_gap", ["math", "science"], {})
    with pytest.raises(ValueError, match="domains"):
        other.load_state_dict(mix.state_dict())


# --- registry -----------------------------------------------------------------------------------------------------

def test_registry_lists_every_family():
    listed = {(name, family.name, signal) for name, family, signal in list_policies()}
    assert {("baseline", "none", None), ("difffilter", "selection", "solve_rate"),
            ("softmax", "reweighting", "mean_abs_advantage"), ("static", "mixture", None),
            ("reward_gap", "mixture", "domain_mean_reward")} <= listed


def test_unknown_names_and_params_raise_value_error():
    with pytest.raises(ValueError, match="difffilter"):
        build_response_policy("no_such_policy", {})
    with pytest.raises(ValueError, match="low"):
        build_response_policy("difffilter", {"lower": 0.1})
    with pytest.raises(ValueError, match="no parameters"):
        build_response_policy("baseline", {"low": 0.1})
    with pytest.raises(ValueError, match="unknown.*difffilter"):
        build_response_policy("static", {})  # a mixture is not a response policy
    with pytest.raises(ValueError, match="static"):
        build_mixture("difffilter", DOMAINS, {})
    with pytest.raises(ValueError, match="decay"):
        build_mixture("reward_gap", DOMAINS, {"decai": 0.5})
