"""GradAlign's scorer: the probe loss, alignment scores and selection rules against hand-computed answers, and the
per-group gradients of a real tiny embedded model against one backward per group and the backend's own log-probs."""
import math

import pytest
import torch

from dataflex_rl.training import grpo
from dataflex_rl.backends.embedded.generation import decode
from dataflex_rl.backends.embedded.model import load_model
from dataflex_rl.backends.embedded.sequences import response_logprobs
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.prompt_selection import gradients
from dataflex_rl.prompt_selection.gradients import (ParameterLayout, group_gradients, random_projection,
                                                    summed_gradient)
from dataflex_rl.prompt_selection.round import ProbeRollouts, RoundPlan, SelectionRound
from dataflex_rl.prompt_selection.scores import (accgreedy_order, adam_precondition, alignment_scores,
                                                 module_contributions, probe_loss, select_top, simacc_scores,
                                                 zero_advantage)
from tiny_base import TEMPLATE, tiny_base

EPS = 1e-5


# ---- a softmax policy over 3 actions with logits (θ0, θ1, 0): two parameters, gradients by hand -------------------

def _policy_logp(theta: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    logits = torch.cat([theta, torch.zeros(1, dtype=theta.dtype)])
    return torch.log_softmax(logits, dim=0)[actions]


def _padded(groups: list[list[list[int]]]) -> tuple[torch.Tensor, torch.Tensor]:
    """actions [N, K, L] (0 where padded) and the token mask, from ragged per-response action lists."""
    width = max(len(r) for g in groups for r in g)
    actions = torch.zeros(len(groups), len(groups[0]), width, dtype=torch.long)
    mask = torch.zeros(actions.shape)
    for n, group in enumerate(groups):
        for k, response in enumerate(group):
            actions[n, k, : len(response)] = torch.tensor(response, dtype=torch.long)
            mask[n, k, : len(response)] = 1.0
    return actions, mask


def _softmax_group_grads(theta, groups, rewards, aggregation="token_mean") -> torch.Tensor:
    actions, mask = _padded(groups)
    rows = []
    for n in range(len(groups)):
        theta_n = theta.clone().requires_grad_()
        loss = probe_loss(_policy_logp(theta_n, actions[n : n + 1]), rewards[n : n + 1], mask[n : n + 1], aggregation)
        rows.append(torch.autograd.grad(loss.sum(), theta_n)[0])
    return torch.stack(rows)


def _hand_gradient(theta: list[float], group: list[list[int]], rewards: list[float], aggregation: str) -> list[float]:
    """∇θ of the probe loss from ∇ log softmax(a) = e_a − π, restricted to the two free logits."""
    z = [math.exp(theta[0]), math.exp(theta[1]), 1.0]
    pi = [v / sum(z) for v in z]
    mean = sum(rewards) / len(rewards)
    tokens = sum(len(r) for r in group)
    grad = [0.0, 0.0]
    for response, r in zip(group, rewards):
        weight = 1.0 / tokens if aggregation == "token_mean" else 1.0 / (len(group) * len(response))
        for a in response:
            for j in range(2):
                grad[j] -= weight * (r - mean) * ((a == j) - pi[j])
    return grad


def _cosine(u, v) -> float:
    dot = sum(a * b for a, b in zip(u, v))
    return dot / ((math.hypot(*u) + EPS) * (math.hypot(*v) + EPS))


def test_cosine_of_a_two_parameter_softmax_policy_equals_the_analytic_value():
    # θ = 0, one-token responses: π = 1/3 each and Σ A = 0 cancel, so g = −(1/K) Σ_k A_k e_{a_k}: worked by hand,
    # g_v = −(1/2)(½·e_1 − ½·e_2) = (0, −¼), g_0 = (−¼, 0) (cos 0), g_1 = (−¼, ¼) (cos −1/√2).
    theta = torch.zeros(2, dtype=torch.float64)
    validation = _softmax_group_grads(theta, [[[1], [2]]], torch.tensor([[1.0, 0.0]]))[0]
    candidates = _softmax_group_grads(theta, [[[0], [2]], [[0], [1]]], torch.tensor([[1.0, 0.0], [1.0, 0.0]]))
    assert validation.tolist() == [0.0, -0.25]
    scores = alignment_scores(candidates, validation, torch.tensor([False, False]))
    assert scores.tolist() == pytest.approx([0.0, -1 / math.sqrt(2)], abs=1e-4)

    # θ ≠ 0 and ragged lengths, so π and both aggregations matter: autograd against e_a − π summed by hand.
    theta_values = [0.7, -0.4]
    groups = [[[0, 0, 2], [1]], [[2, 1], [0, 1, 1, 0]], [[1, 2, 2], [0, 2]]]
    rewards = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    validation_group, validation_rewards = [[0, 1], [2, 2, 2], [0]], [1.0, 0.0, 1.0]
    for aggregation in ("token_mean", "seq_mean"):
        theta = torch.tensor(theta_values, dtype=torch.float64)
        validation_r = torch.tensor([validation_rewards], dtype=torch.float64)
        g_v = _softmax_group_grads(theta, [validation_group], validation_r, aggregation)[0]
        g = _softmax_group_grads(theta, groups, torch.tensor(rewards, dtype=torch.float64), aggregation)
        hand_v = _hand_gradient(theta_values, validation_group, validation_rewards, aggregation)
        expected = [_cosine(_hand_gradient(theta_values, grp, r, aggregation), hand_v)
                    for grp, r in zip(groups, rewards)]
        assert g_v.tolist() == pytest.approx(hand_v, abs=1e-12)
        assert alignment_scores(g, g_v, torch.zeros(3, dtype=torch.bool)).tolist() == pytest.approx(expected, abs=1e-6)


# ---- the probe loss is GRPO's PG term at ρ = 1: clipping, KL and std-normalisation do not move a score -----------

def _contextual_policy(seed: int, contexts: int = 5, actions: int = 4) -> torch.Tensor:
    return torch.randn(contexts, actions, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _contextual_batch(seed: int, groups: int = 6, rollouts: int = 4, width: int = 5):
    gen = torch.Generator().manual_seed(seed)
    context = torch.randint(0, 5, (groups, rollouts, width), generator=gen)
    action = torch.randint(0, 4, (groups, rollouts, width), generator=gen)
    lengths = torch.randint(1, width + 1, (groups, rollouts), generator=gen)
    mask = (torch.arange(width)[None, None, :] < lengths[..., None]).double()
    rewards = torch.randint(0, 2, (groups, rollouts), generator=gen).double()
    rewards[0] = torch.tensor([1.0, 0.0, 0.0, 0.0])  # at least one group carries signal
    return context, action, mask, rewards


def _contextual_logp(weights, context, action):
    return torch.log_softmax(weights[context], dim=-1).gather(-1, action[..., None]).squeeze(-1)


def _per_group_grads(weights, context, action, mask, per_group_loss) -> torch.Tensor:
    rows = []
    for n in range(context.shape[0]):
        w = weights.clone().requires_grad_()
        logp = _contextual_logp(w, context[n : n + 1], action[n : n + 1])
        rows.append(torch.autograd.grad(per_group_loss(logp, n), w)[0].flatten())
    return torch.stack(rows)


def _token_mean(per_token, mask):
    return (per_token * mask).sum() / mask.sum()


def test_ppo_clip_at_ratio_one_is_reinforce_and_kl_or_std_normalising_leaves_every_score_unchanged():
    weights = _contextual_policy(3)
    context, action, mask, rewards = _contextual_batch(4)
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    probe = _per_group_grads(weights, context, action, mask,
                             lambda logp, n: probe_loss(logp, rewards[n : n + 1], mask[n : n + 1]).sum())
    reinforce = _per_group_grads(weights, context, action, mask, lambda logp, n: _token_mean(
        -centred[n : n + 1, :, None] * logp, mask[n : n + 1]))
    assert torch.allclose(probe, reinforce, atol=1e-12)

    def ppo(advantages, kl_coef):
        def loss(logp, n):
            adv = advantages[n : n + 1, :, None].expand_as(logp)
            pg, _ = grpo.ppo_clip_token_loss(logp, logp.detach(), adv)
            return _token_mean(pg + kl_coef * grpo.kl_penalty(logp, logp.detach(), "low_var_kl"), mask[n : n + 1])
        return _per_group_grads(weights, context, action, mask, loss)

    std_normalised = grpo.group_advantages(rewards.float()).double()
    assert torch.allclose(ppo(centred, 0.0), reinforce, atol=1e-12)
    assert torch.allclose(ppo(centred, 0.5), reinforce, atol=1e-12)  # low_var_kl has zero gradient at ρ = 1
    validation = torch.randn(probe.shape[1], generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    zero = zero_advantage(rewards)
    assert zero.any() and not zero.all(), "the batch must mix zero-advantage and live groups"
    # The cosine itself (eps = 0) is unchanged; the released eps = 1e-5 in ‖g_i‖ + eps moves it by ~eps/‖g_i‖ only.
    exact = alignment_scores(probe, validation, zero, eps=0.0)
    released = alignment_scores(probe, validation, zero)
    for variant in (ppo(centred, 0.5), ppo(std_normalised, 0.0), ppo(std_normalised, 0.5)):
        assert torch.allclose(alignment_scores(variant, validation, zero, eps=0.0), exact, atol=1e-6)
        assert torch.allclose(alignment_scores(variant, validation, zero), released, atol=1e-3)
        assert select_top(alignment_scores(variant, validation, zero), 6) == select_top(released, 6)


def test_zero_advantage_is_every_centred_reward_below_tolerance():
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.5 + 1e-7]])
    assert zero_advantage(rewards).tolist() == [True, True, False, True]


# ---- selection rules -----------------------------------------------------------------------------------------------

def test_zero_advantage_scores_exactly_zero_and_outranks_negative_alignment():
    validation = torch.tensor([1.0, 0.0])
    candidates = torch.tensor([[0.3, math.sqrt(1 - 0.09)], [-0.2, math.sqrt(1 - 0.04)], [float("nan"), 5.0]])
    scores = alignment_scores(candidates, validation, torch.tensor([False, False, True]))
    assert scores[2].item() == 0.0  # its (here NaN) gradient is never read
    assert scores[:2].tolist() == pytest.approx([0.3, -0.2], abs=1e-4)
    assert set(select_top(scores, keep=2)) == {0, 2}
    assert select_top([0.3, -0.2, 0.0], keep=2) == [0, 2]


def test_select_top_keeps_exactly_keep_in_rank_order_with_ties_to_the_lower_index():
    assert select_top([0.1, 0.5, 0.1, 0.5, -1.0], keep=3) == [1, 3, 0]
    gen = torch.Generator().manual_seed(0)
    for trial in range(50):
        count = int(torch.randint(1, 40, (1,), generator=gen))
        scores = (torch.randint(-3, 4, (count,), generator=gen) / 4).tolist()  # few distinct values: many ties
        keep = int(torch.randint(0, count + 1, (1,), generator=gen))
        kept = select_top(scores, keep)
        assert len(kept) == len(set(kept)) == keep
        dropped = set(range(count)) - set(kept)
        assert all(scores[i] >= scores[j] for i in kept for j in dropped)
        for i in kept:  # a dropped candidate tied with a kept one comes later in the stream
            assert all(j > i for j in dropped if scores[j] == scores[i])
        ranks = [(-scores[i], i) for i in kept]
        assert ranks == sorted(ranks)
    with pytest.raises(ValueError, match="keep must lie in"):
        select_top([0.1, 0.2], keep=3)
    with pytest.raises(ValueError, match="NaN"):
        select_top([0.1, float("nan")], keep=1)


def test_dot_variant_ranks_by_candidate_norm_times_cosine():
    validation = torch.tensor([0.0, 2.0, 0.0])
    # cosines 0.8, 0.6, −1 with norms 1, 5, 3: dot scores 0.8, 3.0, −3.0 (g_v still normalised, by ‖g_v‖ + eps)
    candidates = torch.tensor([[0.6, 0.8, 0.0], [0.0, 3.0, 4.0], [0.0, -3.0, 0.0]])
    live = torch.zeros(3, dtype=torch.bool)
    dot = alignment_scores(candidates, validation, live, normalise_candidates=False)
    assert dot.tolist() == pytest.approx([0.8 * 2 / (2 + EPS), 3.0 * 2 / (2 + EPS), -3.0 * 2 / (2 + EPS)], rel=1e-6)
    assert select_top(dot, 3) == [1, 0, 2]
    assert select_top(alignment_scores(candidates, validation, live), 3) == [0, 1, 2]


def test_accgreedy_sorts_by_distance_from_one_half_with_deterministic_ties():
    # float32 0.4 and 0.6 lie 0.0999999940 and 0.1000000238 from 0.5; they still tie, and tie to the lower index
    rates = torch.tensor([0.4, 0.6, 0.5, 0.0, 0.625, 0.375, 1.0], dtype=torch.float32)
    assert accgreedy_order(rates, keep=5) == [2, 0, 1, 4, 5]
    assert accgreedy_order([0.6, 0.4, 0.0, 1.0], keep=4) == [0, 1, 2, 3]
    assert accgreedy_order([0.6, 0.4, 0.0, 1.0], keep=4) == accgreedy_order(torch.tensor([0.6, 0.4, 0.0, 1.0]), 4)


def test_simacc_is_cosine_times_four_a_one_minus_a():
    scores = simacc_scores(torch.tensor([0.5, -0.4, 0.9, 0.9]), torch.tensor([0.25, 0.5, 0.0, 1.0]))
    assert scores.tolist() == pytest.approx([0.375, -0.4, 0.0, 0.0])


def test_adam_preconditioning_divides_by_bias_corrected_root_second_moment():
    g = torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    # step 1: v̂ = v / 0.001 = (4, 0.25, 0) → g / (2, 0.5, 0) + eps
    v = torch.tensor([0.004, 0.00025, 0.0], dtype=torch.float64)
    assert adam_precondition(g, v, step=1).tolist() == pytest.approx([1 / (2 + 1e-8), -2 / (0.5 + 1e-8), 3 / 1e-8])
    # step 2: 1 − 0.999² = 0.001999, so v = 9 · 0.001999 gives v̂ = 9
    v = torch.full((3,), 9 * 0.001999, dtype=torch.float64)
    assert adam_precondition(g, v, step=2).tolist() == pytest.approx([1 / 3, -2 / 3, 1.0])
    with pytest.raises(ValueError, match="step must be ≥ 1"):
        adam_precondition(g, v, step=0)


class _FixedGradients:
    """A probe whose validation groups have the hand-written gradients g_1 = (8, 3), g_2 = (0, −2) and whose Adam
    second moment v = (0.004, 0.001) at step 1 gives v̂ = (4, 1), i.e. the denominator D = (2, 1) (+1e-8)."""

    groups = torch.tensor([[8.0, 3.0], [0.0, -2.0]], dtype=torch.float64)

    def rollouts(self, rows, samples, stream, noisy):
        return ProbeRollouts(torch.tensor([[1.0, 0.0]] * len(rows)), None)

    def group_gradients(self, rollouts, aggregation):
        return self.groups.clone()

    def summed_gradient(self, rollouts, aggregation):
        return self.groups.sum(dim=0)

    def adam_second_moment(self):
        return torch.tensor([0.004, 0.001], dtype=torch.float64), 1


def _validation_gradient(normalise_groups: bool, precondition: str) -> list[float]:
    plan = RoundPlan(index=0, chunk=(0,), keep=1, rollouts_candidate=2, rollouts_validation=4, validation=(1, 2),
                     pool=(0,), seed=0)
    return SelectionRound(plan, _FixedGradients()).validation_gradient("token_mean", 0, normalise_groups,
                                                                       precondition).tolist()


def test_normalised_validation_groups_under_adam_are_preconditioned_before_their_normalisation():
    """The released `--norm_before_accumlation --use_optimizer`: g_v = Σ_g unit(g_g / D). By hand: g_1/D = (4, 3),
    norm 5, unit (0.8, 0.6); g_2/D = (0, −2), unit (0, −1); the sum (0.8, −0.4). (Normalising first and dividing the
    sum by D would give ((8/√73)/2, 3/√73 − 1) = (0.468, −0.649), another direction.)"""
    assert _validation_gradient(True, "adam") == pytest.approx([0.8, -0.4], abs=1e-5)
    assert _validation_gradient(True, "none") == pytest.approx([8 / math.sqrt(73), 3 / math.sqrt(73) - 1], abs=1e-5)
    # without the per-group normalisation: the plain sum (8, 1), divided by D = (2, 1)
    assert _validation_gradient(False, "adam") == pytest.approx([4.0, 1.0], abs=1e-6)
    assert _validation_gradient(False, "none") == pytest.approx([8.0, 1.0])


def test_random_projection_preserves_dot_products_and_is_deterministic_per_seed(monkeypatch):
    gen = torch.Generator().manual_seed(1)
    vectors = torch.randn(6, 3000, generator=gen)
    vectors = vectors / vectors.norm(dim=1, keepdim=True)
    dim = 4096
    projected = random_projection(vectors, dim, seed=7)
    # JL: for unit vectors the projected dot product has standard deviation ≤ sqrt(2/dim) ≈ 0.022; allow 7σ
    assert (projected @ projected.T - vectors @ vectors.T).abs().max() < 0.15
    assert torch.equal(random_projection(vectors, dim, seed=7), projected)
    assert not torch.allclose(random_projection(vectors, dim, seed=8), projected)
    assert torch.allclose(random_projection(vectors[2], dim, seed=7), projected[2], atol=1e-5)
    monkeypatch.setattr(gradients, "_PROJECTION_BLOCK", dim * 7)  # 7 rows at a time: the same matrix
    assert torch.allclose(random_projection(vectors, dim, seed=7), projected, atol=1e-5)


# ---- a real tiny embedded model and real decoded rollouts ----------------------------------------------------------

@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    """A warmed-up tiny model (it emits end-of-text, so response lengths differ), 6 prompts × 4 sampled rollouts."""
    root = tmp_path_factory.mktemp("gradalign")
    corpus = tiny_base(root, WarmupSettings(steps=80, batch_size=16), items_per_domain=20)
    model, tok = load_model(root / "base")
    prompts = [tok(TEMPLATE.format(question=q)).input_ids for q in corpus.prompt[:6]]
    generated = decode(model, prompts, max_new_tokens=8, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, repeats=4,
                       generator=torch.Generator().manual_seed(0))
    lengths = generated.response_mask.sum(-1)
    assert lengths.min() < lengths.max(), "responses of one length cannot tell the aggregations apart"
    rewards = torch.tensor([[1, 0, 0, 1], [1, 1, 1, 1], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1], [0, 1, 1, 0]]).float()
    return model, generated, rewards


def _backend_gradient(model, generated, rewards, aggregation) -> torch.Tensor:
    """∇ Σ probe_loss through the backend's own shared-prefix, KV-cached log-probs and a plain `.backward()`."""
    groups, rollouts = rewards.shape
    logp = response_logprobs(model, generated.prompt_ids, generated.prompt_mask, generated.response_ids,
                             generated.response_mask, repeats=rollouts).view(groups, rollouts, -1)
    mask = generated.response_mask.view(groups, rollouts, -1).float()
    model.zero_grad()
    probe_loss(logp, rewards, mask, aggregation).sum().backward()
    flat = torch.cat([p.grad.flatten() for p in model.parameters()])
    model.zero_grad(set_to_none=True)
    return flat


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean"])
def test_validation_gradient_is_the_sum_of_group_gradients_and_matches_the_backend_logprobs(rollout, aggregation):
    model, generated, rewards = rollout
    g_v = summed_gradient(model, generated, rewards, aggregation=aggregation)
    rows = group_gradients(model, generated, rewards, aggregation=aggregation, method="loop")
    scale = g_v.abs().max()
    assert scale > 0
    assert (g_v - rows.sum(0)).abs().max() <= 1e-5 * scale
    assert (g_v - _backend_gradient(model, generated, rewards, aggregation)).abs().max() <= 1e-5 * scale


def test_aggregations_differ_on_ragged_responses(rollout):
    model, generated, rewards = rollout
    token = summed_gradient(model, generated, rewards, aggregation="token_mean")
    seq = summed_gradient(model, generated, rewards, aggregation="seq_mean")
    assert (token - seq).abs().max() > 1e-3 * token.abs().max()


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean"])
def test_vmap_path_equals_one_backward_per_group(rollout, aggregation):
    model, generated, rewards = rollout
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    kernel = model.config._attn_implementation
    model.train()
    loop = group_gradients(model, generated, rewards, aggregation=aggregation, method="loop")
    fast = group_gradients(model, generated, rewards, aggregation=aggregation, method="vmap", chunk=4)
    assert model.training  # probed in eval mode, handed back in the mode it came in
    model.eval()
    # absolute tolerance 1e-5 on every entry (the largest entries are ~1e-1)
    assert (loop - fast).abs().max() <= 1e-5
    zero = zero_advantage(rewards)
    assert loop[~zero].abs().amax(dim=1).min() > 1e-4 and not loop[zero].any() and not fast[zero].any()
    assert all(torch.equal(p, before[name]) and p.grad is None for name, p in model.named_parameters())
    assert model.config._attn_implementation == kernel


def test_layout_groups_parameters_into_modules_and_contributions_sum_to_the_dot_product(rollout):
    model, _, _ = rollout
    layout = ParameterLayout.of(model)
    assert layout.size == sum(p.numel() for p in model.parameters())  # tied lm_head counted once
    modules = layout.modules()
    layers = model.config.num_hidden_layers
    expected = {"model.embed_tokens", "model.norm"} | {
        f"model.layers.{i}.{block}" for i in range(layers)
        for block in ("self_attn", "mlp", "input_layernorm", "post_attention_layernorm")}
    assert set(modules) == expected
    assert modules["model.layers.0.self_attn"] == tuple(
        f"model.layers.0.self_attn.{p}_proj.{kind}" for p, kind in
        [("q", "weight"), ("q", "bias"), ("k", "weight"), ("k", "bias"), ("v", "weight"), ("v", "bias"),
         ("o", "weight")])
    gen = torch.Generator().manual_seed(2)
    v, g = torch.randn(layout.size, generator=gen), torch.randn(layout.size, generator=gen)
    shares = module_contributions(v, g, layout)
    assert sum(shares.values()) == pytest.approx(float(v.double() @ g.double()), abs=1e-9)
    embed = layout.slices["model.embed_tokens.weight"]
    assert shares["model.embed_tokens"] == pytest.approx(float(v[embed].double() @ g[embed].double()), abs=1e-9)


def test_gradients_refuse_a_reward_shape_that_does_not_match_the_rollout_and_unknown_methods(rollout):
    model, generated, rewards = rollout
    with pytest.raises(ValueError, match=r"must match the rollout: 6 prompts and 24 responses"):
        summed_gradient(model, generated, rewards[:5])
    with pytest.raises(ValueError, match=r"must match the rollout"):
        group_gradients(model, generated, rewards.view(12, 2))
    with pytest.raises(ValueError, match="unknown gradient method 'ghost'; known: loop, vmap"):
        group_gradients(model, generated, rewards, method="ghost")
