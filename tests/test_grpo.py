"""GRPO maths against answers worked out by hand (the arithmetic is in the comments)."""
import math

import pytest
import torch

from dataflex_rl.training.grpo import group_advantages, grpo_loss, kl_penalty, ppo_clip_token_loss, seq_mean_token_mean

LN2 = math.log(2.0)


def test_group_advantages_unbiased_std_and_constant_group():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    # Group 0: mean 0.4; deviations 0.6, -0.4; Σ dev² = 2·0.36 + 3·0.16 = 1.2; unbiased var = 1.2/4 = 0.3;
    # std = sqrt(0.3) = 0.5477226. A = 0.6/0.5477226 = 1.0954451, -0.4/0.5477226 = -0.7302967.
    # Group 1: all equal → deviations 0 → zeros.
    expected = torch.tensor([[1.0954451, -0.7302967, -0.7302967, 1.0954451, -0.7302967], [0.0] * 5])
    torch.testing.assert_close(group_advantages(rewards), expected, atol=1e-5, rtol=0)


def test_group_advantages_without_std_and_single_response_groups():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.0]])
    # Without the std: r − 0.4.
    torch.testing.assert_close(group_advantages(rewards, normalize_by_std=False),
                               torch.tensor([[0.6, -0.4, -0.4, 0.6, -0.4]]))
    # K = 1: mean 0, std 1 as verl → A = r / (1 + eps).
    torch.testing.assert_close(group_advantages(torch.tensor([[0.7], [0.0]])), torch.tensor([[0.7], [0.0]]),
                               atol=1e-6, rtol=0)


def test_group_advantages_reject_non_finite_rewards():
    with pytest.raises(FloatingPointError, match="advantages"):
        group_advantages(torch.tensor([[1.0, float("nan")]]))


def test_kl_estimators_on_a_concrete_pair():
    logp, ref = torch.tensor([0.0]), torch.tensor([LN2])
    # k3: kl = ref − logp = ln2; ratio = e^{ln2} = 2; kld = 2 − 0.6931472 − 1 = 0.3068528.
    torch.testing.assert_close(kl_penalty(logp, ref, "low_var_kl"), torch.tensor([0.3068528]))
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), torch.tensor([0.3068528]))
    torch.testing.assert_close(kl_penalty(logp, ref, "kl"), torch.tensor([-LN2]))  # logp − ref
    torch.testing.assert_close(kl_penalty(logp, ref, "abs"), torch.tensor([LN2]))
    torch.testing.assert_close(kl_penalty(logp, ref, "mse"), torch.tensor([0.2402265]))  # 0.5·0.6931472² = 0.2402265


def test_low_var_kl_clamps():
    # ref − logp = 30 → clamp 20 → e^20 − 21 ≫ 10 → 10.  ref − logp = −30 → −20 → e^-20 + 20 − 1 ≈ 19 → 10.
    out = kl_penalty(torch.tensor([0.0, 0.0]), torch.tensor([30.0, -30.0]), "low_var_kl")
    torch.testing.assert_close(out, torch.tensor([10.0, 10.0]))
    with pytest.raises(ValueError, match="low_var_kl"):
        kl_penalty(torch.tensor([0.0]), torch.tensor([0.0]), "k9")


def test_ppo_clip_above_and_below_the_range():
    ratio = torch.tensor([1.5, 1.5, 0.5, 0.5, 1.1])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0])
    # ρ=1.5, A=+1: max(−1.5, −1.2) = −1.2 (clipped).   ρ=1.5, A=−1: max(1.5, 1.2) = 1.5.
    # ρ=0.5, A=+1: max(−0.5, −0.8) = −0.5.             ρ=0.5, A=−1: max(0.5, 0.8) = 0.8 (clipped).
    # ρ=1.1, A=+2: inside the range, −2.2 both ways, not counted as clipped.
    loss, clipped = ppo_clip_token_loss(ratio.log(), torch.zeros(5), adv)
    torch.testing.assert_close(loss, torch.tensor([-1.2, 1.5, -0.5, 0.8, -2.2]))
    assert clipped.tolist() == [True, False, False, True, False]


def test_ppo_clip_asymmetric_bounds():
    # clip_high 0.28: ρ=1.25 < 1.28 stays unclipped (−1.25); ρ=0.7 with clip_low 0.2, A=−1: max(0.7, 0.8) = 0.8.
    loss, _ = ppo_clip_token_loss(torch.tensor([1.25, 0.7]).log(), torch.zeros(2), torch.tensor([1.0, -1.0]),
                                  clip_low=0.2, clip_high=0.28)
    torch.testing.assert_close(loss, torch.tensor([-1.25, 0.8]))


def _two_by_two():
    # G=2, K=2, L=4; padding holds 100 to show it never leaks in.
    loss = torch.tensor([[[1.0, 2.0, 3.0, 100.0], [4.0, 100.0, 100.0, 100.0]],
                         [[2.0, 2.0, 100.0, 100.0], [6.0, 0.0, 0.0, 0.0]]])
    mask = torch.tensor([[[1.0, 1, 1, 0], [1, 0, 0, 0]], [[1, 1, 0, 0], [1, 1, 1, 1]]])
    return loss, mask


def test_seq_mean_token_mean_eq1():
    loss, mask = _two_by_two()
    # Response means: (1+2+3)/3 = 2, 4/1 = 4, (2+2)/2 = 2, (6+0+0+0)/4 = 1.5; Σ = 9.5; /(G·K = 4) = 2.375.
    assert seq_mean_token_mean(loss, mask).item() == pytest.approx(2.375)


def test_dropped_response_stays_in_the_denominator():
    loss, mask = _two_by_two()
    drop = torch.ones(2, 2, 1)
    drop[0, 1] = 0.0
    # Dropping response (0,1) removes its 4: Σ = 2 + 0 + 2 + 1.5 = 5.5; /4 = 1.375 (renormalising would give 5.5/3).
    assert seq_mean_token_mean(loss * drop, mask).item() == pytest.approx(1.375)


def test_empty_response_adds_zero_without_nan():
    loss, mask = _two_by_two()
    mask[1, 1] = 0.0
    # Response (1,1) is empty: Σ = 2 + 4 + 2 + 0 = 8; /4 = 2.0.
    assert seq_mean_token_mean(loss, mask).item() == pytest.approx(2.0)


def _tiny_case():
    # G=1, K=2, L=2: response 0 has 2 tokens with A=+1, response 1 has 1 token (one padding) with A=−2.
    logp = torch.tensor([[[-1.0, -2.0], [-0.5, -3.0]]], requires_grad=True)
    old = logp.detach().clone()              # ratio 1: on-policy, no clipping
    ref = logp.detach() + LN2                # ref − logp = ln2 on every token
    adv = torch.tensor([[[1.0, 1.0], [-2.0, -2.0]]])
    mask = torch.tensor([[[1.0, 1.0], [1.0, 0.0]]])
    pg_w = torch.tensor([[[0.5, 0.5], [2.0, 2.0]]])
    return logp, old, ref, adv, mask, pg_w


def test_grpo_loss_value_and_gradient_match_hand_derivation():
    logp, old, ref, adv, mask, pg_w = _tiny_case()
    beta = 0.1
    loss, stats = grpo_loss(logp, old, ref, adv, mask, pg_w, torch.ones_like(mask), kl_coef=beta)
    # Token terms: pg = −A·1; k3 kl = 2 − ln2 − 1 = 0.3068528, times β = 0.03068528.
    # Response 0: 0.5·(−1) + 0.0306853 = −0.4693147 per token, mean −0.4693147.
    # Response 1: 2·(+2) + 0.0306853 = 4.0306853.   Loss = (−0.4693147 + 4.0306853) / 2 = 1.7806853.
    assert loss.item() == pytest.approx(1.7806853, abs=1e-6)
    # pg part alone: (−0.5 + 4) / 2 = 1.75; kl mean over 3 valid tokens = 0.3068528; nothing clipped.
    assert stats == pytest.approx({"pg_loss": 1.75, "kl": 0.3068528, "clip_fraction": 0.0}, abs=1e-6)
    # ∂ℓ/∂logp per token = w·(−A·ρ) + β·(1 − e^{ref−logp}) = w·(−A) + 0.1·(1 − 2) = w·(−A) − 0.1.
    # ∂L/∂logp = 1/(G·K) · 1/L_gk · that:
    #   response 0: 1/2 · 1/2 · (−0.5 − 0.1) = −0.15 per token;  response 1: 1/2 · 1/1 · (4 − 0.1) = 1.95; padding 0.
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[[-0.15, -0.15], [1.95, 0.0]]]))


def test_grpo_loss_drop_halves_rather_than_renormalises():
    logp, old, ref, adv, mask, _ = _tiny_case()
    same_adv = torch.ones_like(adv)
    full_mask = torch.ones_like(mask)
    keep_all = torch.ones_like(mask)
    keep_first = torch.tensor([[[1.0, 1.0], [0.0, 0.0]]])
    full, _ = grpo_loss(logp, old, ref, same_adv, full_mask, keep_all, keep_all)
    dropped, _ = grpo_loss(logp, old, ref, same_adv, full_mask, keep_first, keep_first)
    # Both responses contribute the same per-token terms; dropping one (PG and KL) halves the loss.
    assert dropped.item() == pytest.approx(full.item() / 2)


def test_grpo_loss_refuses_non_finite_values_and_wrong_shapes():
    logp, old, ref, adv, mask, pg_w = _tiny_case()
    ones = torch.ones_like(mask)
    bad_adv = adv.clone()
    bad_adv[0, 0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match="advantages"):
        grpo_loss(logp, old, ref, bad_adv, mask, pg_w, ones)
    bad_logp = logp.detach().clone()
    bad_logp[0, 0, 0] = float("nan")  # an inf log-prob is clamped away, as in verl; NaN is not
    with pytest.raises(FloatingPointError, match="loss"):
        grpo_loss(bad_logp, old, ref, adv, mask, pg_w, ones)
    with pytest.raises(ValueError, match="pg_weights"):
        grpo_loss(logp, old, ref, adv, mask, pg_w[..., 0], ones)


def test_nan_in_padding_changes_neither_loss_nor_gradient():
    logp, old, ref, adv, mask, pg_w = _tiny_case()
    ones = torch.ones_like(mask)
    clean, _ = grpo_loss(logp, old, ref, adv, mask, pg_w, ones, kl_coef=0.1)
    clean.backward()
    clean_grad = logp.grad.clone()
    # Position (0, 1, 1) is padding: poison every log-prob there.
    dirty_logp = logp.detach().clone()
    dirty_logp[0, 1, 1] = float("nan")
    dirty_logp.requires_grad_(True)
    dirty_old, dirty_ref = old.clone(), ref.clone()
    dirty_old[0, 1, 1], dirty_ref[0, 1, 1] = float("nan"), float("-inf")
    dirty, _ = grpo_loss(dirty_logp, dirty_old, dirty_ref, adv, mask, pg_w, ones, kl_coef=0.1)
    dirty.backward()
    assert dirty.item() == pytest.approx(clean.item())
    torch.testing.assert_close(dirty_logp.grad, clean_grad)  # finite, and 0 at the padded position
