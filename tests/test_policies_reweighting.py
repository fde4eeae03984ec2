"""Reweighting policies (ar, per, diffband) and the normalisation modes, on hand-computed batches."""
import pytest
import torch

from dataflex_rl.policies import GroupBatch, build_response_policy
from dataflex_rl.policies.weights import reweighting_weights


def batch_with(rewards, lengths, max_len, response_adv=None, token_probs=None):
    rewards = torch.tensor(rewards, dtype=torch.float32)
    lengths = torch.tensor(lengths, dtype=torch.float32)
    mask = (torch.arange(max_len)[None, None, :] < lengths[..., None]).float()
    adv = torch.zeros_like(rewards) if response_adv is None else torch.tensor(response_adv, dtype=torch.float32)
    probs = torch.full_like(mask, 0.5) if token_probs is None else torch.tensor(token_probs, dtype=torch.float32)
    groups = rewards.shape[0]
    return GroupBatch(rewards=rewards, lengths=lengths, token_mask=mask, advantages=adv[..., None] * mask,
                      old_logprobs=probs.log() * mask, domains=("math",) * groups,
                      prompt_ids=tuple(f"p{g}" for g in range(groups)))


# --- ar -----------------------------------------------------------------------------------------------------------

def test_ar_token_weights_by_hand():
    # Tokens with π = 0.2 and 1.0 (second response: one token, then padding).
    batch = batch_with([[1.0, 0.0]], [[2, 1]], 2, token_probs=[[[0.2, 1.0], [1.0, 0.7]]])
    # α = 0.5: w = 0.5·π + 0.5 → 0.6, 1.0 | 1.0, (padding 0).
    raw = build_response_policy("ar", {"normalize": "none"}).weigh(batch)
    torch.testing.assert_close(raw.pg, torch.tensor([[[0.6, 1.0], [1.0, 0.0]]]))
    torch.testing.assert_close(raw.kl, batch.token_mask)
    # Batch mean over the 3 valid tokens: 2.6/3 → 0.6·3/2.6 = 0.692308, 1·3/2.6 = 1.153846.
    normed = build_response_policy("ar", {}).weigh(batch)
    torch.testing.assert_close(normed.pg, torch.tensor([[[0.692308, 1.153846], [1.153846, 0.0]]]))
    # AR-Lopti's α = 0.2: 0.2·0.2 + 0.8 = 0.84, and 1.0.
    lopti = build_response_policy("ar", {"alpha": 0.2, "normalize": "none"}).weigh(batch)
    torch.testing.assert_close(lopti.pg[0, 0], torch.tensor([0.84, 1.0]))
    # α = 0 is the baseline.
    torch.testing.assert_close(build_response_policy("ar", {"alpha": 0.0}).weigh(batch).pg, batch.token_mask)
    # Released semantics: token weights are normalised over tokens, as the released code did.
    released = build_response_policy("ar", {"semantics": "dataflex_released"}).weigh(batch)
    torch.testing.assert_close(released.pg, normed.pg)
    with pytest.raises(ValueError, match="alpha"):
        build_response_policy("ar", {"alpha": 1.5}).weigh(batch)


# --- per ----------------------------------------------------------------------------------------------------------

def test_per_weights_by_hand():
    # a = 0, 1, 4 → (a + 0)^0.5 = 0, 1, 2. Lengths 1, 1, 2.
    batch = batch_with([[1.0, 0.0, 1.0]], [[1, 1, 2]], 2, response_adv=[[0.0, -1.0, 4.0]])
    raw = build_response_policy("per", {"eps": 0.0, "normalize": "none"}).weigh(batch)
    torch.testing.assert_close(raw.pg, torch.tensor([[[0.0, 0.0], [1.0, 0.0], [2.0, 2.0]]]))
    assert raw.kept_fraction == pytest.approx(2 / 3)  # a zero-weight response has lost its PG term
    # Batch mean over the 4 valid tokens: (0 + 1 + 2 + 2)/4 = 1.25 → 0, 0.8, 1.6.
    tokens = build_response_policy("per", {"eps": 0.0}).weigh(batch)
    torch.testing.assert_close(tokens.pg, torch.tensor([[[0.0, 0.0], [0.8, 0.0], [1.6, 1.6]]]))
    # Response mean: (0 + 1 + 2)/3 = 1 → unchanged (the released code's rule for per-response weights).
    responses = build_response_policy("per", {"eps": 0.0, "normalize": "response_mean"}).weigh(batch)
    torch.testing.assert_close(responses.pg, raw.pg)
    released = build_response_policy("per", {"eps": 0.0, "semantics": "dataflex_released"}).weigh(batch)
    torch.testing.assert_close(released.pg, raw.pg)
    # exponent 1: 0, 1, 4 → response mean 5/3 → 0, 0.6, 2.4.
    linear = build_response_policy("per", {"eps": 0.0, "exponent": 1.0, "normalize": "response_mean"}).weigh(batch)
    torch.testing.assert_close(linear.pg[0, :, 0], torch.tensor([0.0, 0.6, 2.4]))


def test_per_with_all_zero_advantages_is_uniform():
    batch = batch_with([[1.0, 1.0], [0.0, 0.0]], [[2, 1], [1, 2]], 2)
    for params in ({}, {"eps": 0.0}, {"semantics": "dataflex_released"}):
        weights = build_response_policy("per", params).weigh(batch)
        torch.testing.assert_close(weights.pg, batch.token_mask)
        assert torch.isfinite(weights.pg).all()
    assert build_response_policy("per", {"eps": 0.0}).weigh(batch).info["degenerate_weights"] is True


# --- diffband -----------------------------------------------------------------------------------------------------

def test_diffband_strict_and_closed_bands_on_continuous_rewards():
    # Rewards 0, .25, .5, .75, 1: quartiles (linear) q1 = .25, q3 = .75.
    batch = batch_with([[0.0, 0.25, 0.5, 0.75, 1.0]], [[1] * 5], 1)
    paper = build_response_policy("diffband", {"normalize": "none"}).weigh(batch)
    torch.testing.assert_close(paper.pg.flatten(), torch.tensor([1.0, 1.0, 2.0, 1.0, 1.0]))  # strictly inside
    released = build_response_policy("diffband", {"semantics": "dataflex_released", "normalize": "none"}).weigh(batch)
    torch.testing.assert_close(released.pg.flatten(), torch.tensor([1.0, 2.0, 2.0, 2.0, 1.0]))  # closed band
    # Normalised: paper by token mean (all lengths 1): 6/5 → 5/6, 5/3; released by response mean 8/5 → 5/8, 5/4.
    torch.testing.assert_close(build_response_policy("diffband", {}).weigh(batch).pg.flatten(),
                               torch.tensor([5 / 6, 5 / 6, 5 / 3, 5 / 6, 5 / 6]))
    torch.testing.assert_close(build_response_policy("diffband", {"semantics": "dataflex_released"}).weigh(batch)
                               .pg.flatten(), torch.tensor([0.625, 1.25, 1.25, 1.25, 0.625]))


def test_diffband_with_binary_rewards_collapses():
    # 40% solved: q1 = 0, q3 = 1 → strict band empty, closed band everything: both uniform after normalisation.
    mixed = batch_with([[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]], [[1] * 5] * 2, 1)
    for params in ({}, {"semantics": "dataflex_released"}):
        torch.testing.assert_close(build_response_policy("diffband", params).weigh(mixed).pg, mixed.token_mask)
    # 80% failed: q1 = q3 = 0 → the strict band is still empty; the closed band doubles every failure:
    # raw 2, 2, 2, 2, 1 → response mean 1.8 → 1.1111 for failures, 0.5556 for the success.
    failing = batch_with([[0, 0, 1, 0, 0]], [[1] * 5], 1)
    torch.testing.assert_close(build_response_policy("diffband", {}).weigh(failing).pg, failing.token_mask)
    released = build_response_policy("diffband", {"semantics": "dataflex_released"}).weigh(failing)
    torch.testing.assert_close(released.pg.flatten(), torch.tensor([2, 2, 1, 2, 2]) / 1.8)
    # A batch of one response: weight 1.
    single = batch_with([[1.0]], [[1]], 1)
    torch.testing.assert_close(build_response_policy("diffband", {}).weigh(single).pg, single.token_mask)


# --- normalisation modes ------------------------------------------------------------------------------------------

def test_response_mean_normalisation_of_token_weights():
    mask = torch.tensor([[[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]])  # third response empty
    raw = torch.tensor([[[1.0, 3.0], [4.0, 9.0], [5.0, 5.0]]])
    # Token means over valid tokens: 2 and 4 (the empty response does not count) → mean 3 → scale 1/3.
    out = reweighting_weights(raw, mask, normalize="response_mean")
    torch.testing.assert_close(out.pg, torch.tensor([[[1 / 3, 1.0], [4 / 3, 0.0], [0.0, 0.0]]]))
    # Every response empty: no 0/0.
    empty = reweighting_weights(torch.ones(1, 2), torch.zeros(1, 2, 2), normalize="response_mean")
    assert torch.count_nonzero(empty.pg) == 0 and torch.isfinite(empty.pg).all()
    empty_tokens = reweighting_weights(torch.ones(1, 2), torch.zeros(1, 2, 2))
    assert torch.isfinite(empty_tokens.pg).all()


def test_response_mean_keeps_the_eq1_loss_scale():
    # Under Eq. 1 each response contributes its token-mean weight; response_mean makes their average exactly 1.
    batch = batch_with([[1.0, 0.0, 0.5]], [[1, 3, 2]], 3, response_adv=[[0.3, 2.0, 1.0]])
    weights = build_response_policy("softmax", {"normalize": "response_mean"}).weigh(batch)
    per_response = weights.pg.sum(-1) / batch.lengths
    assert per_response.mean().item() == pytest.approx(1.0)
    assert build_response_policy("softmax", {"semantics": "dataflex_released"}).options["normalize"] is None
    torch.testing.assert_close(build_response_policy("softmax", {"semantics": "dataflex_released"}).weigh(batch).pg,
                               weights.pg)
