"""dataflex_rl.training.grpo computes what verl 0.9.1 computes: advantages, every loss aggregation, the KL estimators,
the vanilla PPO policy loss, and the whole GRPO loss of a selection or a reweighting once the verl trainer has written
it back (a zeroed `response_mask` for a response whose KL is dropped, `rollout_is_weights` for the rest).

verl is imported for real (no Ray is started, no GPU is used); its functions are the independent reference. Batches
are random, over several seeds and shapes, with empty responses (no valid token: verl's "fully masked" rows) and
responses that fill every position; everything is compared in float64 to 1e-6.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import verl
from hydra import compose, initialize_config_dir
from verl.trainer.ppo import core_algos
from verl.utils.config import omega_conf_to_dataclass

from dataflex_rl.training import grpo
from dataflex_rl.policies.weights import reweighting_weights, selection_weights

TOL = {"atol": 1e-6, "rtol": 1e-6}
# (seed, G prompt groups, K rollouts, L padded response tokens); K = 1 makes every group a group of one.
SHAPES = [(0, 4, 5, 7), (1, 3, 2, 1), (2, 6, 4, 12), (3, 5, 1, 6), (4, 1, 8, 9)]
SHAPE_IDS = [f"seed{s}-G{g}K{k}L{length}" for s, g, k, length in SHAPES]


def _token_mask(gen: torch.Generator, groups: int, rollouts: int, length: int) -> torch.Tensor:
    """A right-padded response mask `[G, K, L]` of random lengths, with one empty response and one full one."""
    lengths = torch.randint(0, length + 1, (groups, rollouts), generator=gen)
    lengths.view(-1)[0] = 0
    lengths.view(-1)[-1] = length
    return (torch.arange(length) < lengths[..., None]).double()


def _batch(seed: int, groups: int, rollouts: int, length: int) -> dict[str, torch.Tensor]:
    """Random log-probs far enough off-policy that the PPO clip and the dual clip both bind somewhere."""
    gen = torch.Generator().manual_seed(seed)
    shape = (groups, rollouts, length)
    token_mask = _token_mask(gen, groups, rollouts, length)
    old_logp = -3.0 * torch.rand(shape, generator=gen, dtype=torch.float64)
    logp = old_logp + 1.5 * torch.randn(shape, generator=gen, dtype=torch.float64)
    ref_logp = old_logp + 0.5 * torch.randn(shape, generator=gen, dtype=torch.float64)
    rewards = torch.randint(0, 2, (groups, rollouts), generator=gen).double()
    rewards = torch.where(token_mask.sum(-1) > 0, rewards, torch.zeros_like(rewards))  # an empty answer scores 0
    advantages = grpo.group_advantages(rewards)[..., None] * token_mask
    return {"token_mask": token_mask, "old_logp": old_logp, "logp": logp, "ref_logp": ref_logp, "rewards": rewards,
            "advantages": advantages, "gen": gen}


def _flat(tensor: torch.Tensor) -> torch.Tensor:
    """`[G, K, L]` → verl's `[batch, L]`, response (g, k) at row g·K + k."""
    return tensor.reshape(-1, tensor.shape[-1])


def _actor_config(**overrides):
    """verl's actor config as its worker builds it: the composed ppo_trainer config turned into its dataclass."""
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    args = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            *(f"actor_rollout_ref.actor.{key}={value}" for key, value in overrides.items())]
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        composed = compose(config_name="ppo_trainer", overrides=args)
    return omega_conf_to_dataclass(composed.actor_rollout_ref.actor)


@pytest.fixture(scope="module")
def actor_configs():
    """verl's defaults (clip 0.2 both sides, dual clip c = 3) and an asymmetric clip with a tighter dual clip."""
    return {"default": _actor_config(), "asymmetric": _actor_config(clip_ratio_high=0.28, clip_ratio_c=2.0)}


def _global_batch_info(token_mask: torch.Tensor) -> dict:
    """What verl's worker fills in for one mini-batch that is the whole step (ppo_mini_batch_size ==
    train_batch_size, one data-parallel rank): the step's responses and the valid tokens of its loss mask."""
    return {"dp_size": 1, "batch_num_tokens": int(token_mask.sum()),
            "global_batch_size": token_mask.shape[0] * token_mask.shape[1], "loss_scale_factor": None}


# --- advantages -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("normalize_by_std", [True, False])
@pytest.mark.parametrize(("seed", "groups", "rollouts", "length"), SHAPES, ids=SHAPE_IDS)
def test_group_advantages_equal_verls_grpo_outcome_advantage(seed, groups, rollouts, length, normalize_by_std):
    batch = _batch(seed, groups, rollouts, length)
    token_mask, rewards = batch["token_mask"], batch["rewards"].clone()
    if groups > 1:
        rewards[0, :] = 0.0  # a group whose rewards are all equal (no signal) beside the random ones
    ours = grpo.group_advantages(rewards, normalize_by_std=normalize_by_std)[..., None] * token_mask

    # verl reads a response's reward off its last valid token and groups responses by uid, in any row order.
    lengths = token_mask.sum(-1).long()
    token_rewards = torch.zeros_like(token_mask)
    for g, k in zip(*torch.nonzero(lengths > 0, as_tuple=True)):
        token_rewards[g, k, lengths[g, k] - 1] = rewards[g, k]
    uids = np.array([f"prompt-{g}" for g in range(groups) for _ in range(rollouts)], dtype=object)
    order = torch.randperm(groups * rollouts, generator=batch["gen"])
    theirs, _ = core_algos.compute_grpo_outcome_advantage(
        _flat(token_rewards)[order], _flat(token_mask)[order], uids[order.numpy()],
        norm_adv_by_std_in_grpo=normalize_by_std)
    torch.testing.assert_close(_flat(ours)[order], theirs, **TOL)


# --- aggregation ----------------------------------------------------------------------------------------------------

def _global_args(token_mask: torch.Tensor) -> dict[str, dict]:
    """None of the global counts (verl then counts the local batch), the step's own, and two data-parallel ranks'
    (this rank holds half the responses and tokens) with a constant token-sum-norm horizon."""
    responses, tokens = token_mask.shape[0] * token_mask.shape[1], int(token_mask.sum())
    return {"local": {}, "step": {"global_batch_size": responses},
            "two_ranks": {"global_batch_size": 2 * responses, "batch_num_tokens": 2 * tokens + 3, "dp_size": 2,
                          "loss_scale_factor": 16}}


@pytest.mark.parametrize("counts", ["local", "step", "two_ranks"])
@pytest.mark.parametrize("mode", grpo.LOSS_AGGREGATIONS)
@pytest.mark.parametrize(("seed", "groups", "rollouts", "length"), SHAPES, ids=SHAPE_IDS)
def test_aggregation_equals_verls_agg_loss(seed, groups, rollouts, length, mode, counts):
    batch = _batch(seed, groups, rollouts, length)
    loss, token_mask = batch["logp"], batch["token_mask"]
    kwargs = _global_args(token_mask)[counts]
    ours = grpo.aggregate_token_loss(loss, token_mask, mode, **kwargs)
    theirs = core_algos.agg_loss(_flat(loss), _flat(token_mask), mode, **kwargs)
    torch.testing.assert_close(ours, theirs, **TOL)


def test_eq1_is_seq_mean_token_mean_over_every_response_of_the_step():
    batch = _batch(*SHAPES[0])
    loss, token_mask = batch["logp"], batch["token_mask"]
    groups, rollouts = token_mask.shape[:2]
    eq1 = grpo.seq_mean_token_mean(loss, token_mask)
    torch.testing.assert_close(eq1, core_algos.agg_loss(_flat(loss), _flat(token_mask), "seq-mean-token-mean",
                                                        global_batch_size=groups * rollouts), **TOL)
    # The empty response still counts in 1/(G·K): verl's default (non-empty responses only) gives more.
    assert abs(core_algos.agg_loss(_flat(loss), _flat(token_mask), "seq-mean-token-mean")) > abs(eq1)


def test_aggregation_refuses_an_unknown_mode_and_missing_global_counts():
    token_mask = _token_mask(torch.Generator().manual_seed(0), 2, 3, 4)
    with pytest.raises(ValueError, match="unknown loss aggregation 'seq-mean'"):
        grpo.aggregate_token_loss(token_mask, token_mask, "seq-mean")
    with pytest.raises(ValueError, match="batch_num_tokens"):
        grpo.aggregate_token_loss(token_mask, token_mask, "token-mean", dp_size=2)
    with pytest.raises(ValueError, match="global_batch_size"):
        grpo.aggregate_token_loss(token_mask, token_mask, "seq-mean-token-sum-norm", dp_size=2)


# --- KL -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"])
def test_kl_penalty_equals_verls_including_its_clamps(kind):
    gen = torch.Generator().manual_seed(5)
    logp = -4.0 * torch.rand(6, 50, generator=gen, dtype=torch.float64)
    # ref − logp spans ±45: past the ±20 clamp of the log-ratio, and past the ±10 clamp of k3 from both sides.
    ref_logp = logp + torch.linspace(-45.0, 45.0, 50, dtype=torch.float64)
    ours = grpo.kl_penalty(logp, ref_logp, kind)
    torch.testing.assert_close(ours, core_algos.kl_penalty(logp, ref_logp, kind), **TOL)
    if kind in ("low_var_kl", "k3"):
        gap = ref_logp - logp
        assert (ours[gap > 20] == 10).all() and (ours[gap < -20] == 10).all()  # exp(−20) + 20 − 1 = 19 → 10


# --- the PPO policy loss --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("clip", ["default", "asymmetric"])
@pytest.mark.parametrize("mode", grpo.LOSS_AGGREGATIONS)
@pytest.mark.parametrize(("seed", "groups", "rollouts", "length"), SHAPES, ids=SHAPE_IDS)
def test_ppo_clip_loss_equals_verls_vanilla_policy_loss(actor_configs, seed, groups, rollouts, length, mode, clip):
    batch = _batch(seed, groups, rollouts, length)
    token_mask, advantages = batch["token_mask"], batch["advantages"]
    config = actor_configs[clip]
    config.global_batch_info.update(_global_batch_info(token_mask))
    weights = torch.rand(token_mask.shape, generator=batch["gen"], dtype=torch.float64) * 2 * token_mask
    weights[..., 0] = 0.0  # some tokens weighted out

    pg, clipped = grpo.ppo_clip_token_loss(batch["logp"], batch["old_logp"], advantages, config.clip_ratio_low,
                                           config.clip_ratio_high, config.clip_ratio_c)
    ours = grpo.aggregate_token_loss(pg * weights, token_mask, mode, **config.global_batch_info)
    theirs, metrics = core_algos.compute_policy_loss_vanilla(
        _flat(batch["old_logp"]), _flat(batch["logp"]), _flat(advantages), _flat(token_mask), mode, config,
        rollout_is_weights=_flat(weights))
    torch.testing.assert_close(ours, theirs, **TOL)
    clip_fraction = float((clipped * token_mask).sum() / token_mask.sum())
    assert clip_fraction == pytest.approx(metrics["actor/pg_clipfrac"], abs=1e-6)


def test_the_dual_clip_binds_in_these_batches(actor_configs):
    """Where A < 0 and the ratio exceeds clip_ratio_c the dual clip caps the loss at −A·c: without it, the loss above
    would differ from verl's."""
    batch = _batch(*SHAPES[2])
    ratio = (batch["logp"] - batch["old_logp"]).exp()
    binds = (batch["advantages"] < 0) & (ratio > actor_configs["default"].clip_ratio_c) & (batch["token_mask"] > 0)
    assert binds.any()
    pg, _ = grpo.ppo_clip_token_loss(batch["logp"], batch["old_logp"], batch["advantages"])
    torch.testing.assert_close(pg[binds], -3.0 * batch["advantages"][binds])
    assert (pg[binds] < -batch["advantages"][binds] * ratio[binds]).all()


# --- the whole GRPO loss, as the verl trainer writes a policy back --------------------------------------------------

def _written_back(pg_weights: torch.Tensor, kl_weights: torch.Tensor, token_mask: torch.Tensor):
    """The verl trainer's write-back: a response whose KL weights are all 0 gets a zeroed `response_mask` (Eq. 1:
    PG and KL dropped); elsewhere pg/kl goes to `rollout_is_weights`."""
    kept = (kl_weights > 0).any(dim=-1, keepdim=True)
    response_mask = token_mask * kept
    rollout_is_weights = torch.where(kl_weights > 0, pg_weights / kl_weights.clamp_min(1e-12),
                                     torch.zeros_like(pg_weights))
    return response_mask, rollout_is_weights


def _policy_weights(kind: str, batch: dict):
    token_mask, gen = batch["token_mask"], batch["gen"]
    if kind == "reweighting":
        return reweighting_weights(torch.rand(token_mask.shape[:2], generator=gen, dtype=torch.float64), token_mask)
    mask = torch.ones(token_mask.shape[:2], dtype=torch.float64)
    mask.view(-1)[1::2] = 0.0  # every other response dropped, non-empty ones among them
    return selection_weights(mask, token_mask, drop_kl=kind == "paper_selection")


def _verl_grpo_loss(batch, response_mask, rollout_is_weights, mode, config, kl_coef):
    """verl's actor loss with use_kl_loss: the vanilla PG plus kl_coef × the KL aggregated over `response_mask`."""
    config.global_batch_info.update(_global_batch_info(response_mask))
    pg_loss, _ = core_algos.compute_policy_loss_vanilla(
        _flat(batch["old_logp"]), _flat(batch["logp"]), _flat(batch["advantages"]), _flat(response_mask), mode,
        config, rollout_is_weights=_flat(rollout_is_weights))
    kl = core_algos.kl_penalty(_flat(batch["logp"]), _flat(batch["ref_logp"]), "low_var_kl")
    return pg_loss + kl_coef * core_algos.agg_loss(kl, _flat(response_mask), mode, **config.global_batch_info)


@pytest.mark.parametrize("policy", ["paper_selection", "released_selection", "reweighting"])
@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
@pytest.mark.parametrize(("seed", "groups", "rollouts", "length"), SHAPES[:3], ids=SHAPE_IDS[:3])
def test_grpo_loss_equals_verls_actor_loss_after_write_back(actor_configs, seed, groups, rollouts, length, mode,
                                                            policy):
    batch = _batch(seed, groups, rollouts, length)
    weights = _policy_weights(policy, batch)
    kl_coef = 0.05
    ours, _ = grpo.grpo_loss(batch["logp"], batch["old_logp"], batch["ref_logp"], batch["advantages"],
                             batch["token_mask"], weights.pg, weights.kl, kl_coef=kl_coef, loss_aggregation=mode)
    response_mask, rollout_is_weights = _written_back(weights.pg, weights.kl, batch["token_mask"])
    theirs = _verl_grpo_loss(batch, response_mask, rollout_is_weights, mode, actor_configs["default"], kl_coef)
    torch.testing.assert_close(ours, theirs, **TOL)


@pytest.mark.parametrize("mode", ["seq-mean-token-mean", "token-mean"])
def test_a_drop_removes_the_kl_under_eq1_and_keeps_it_as_released(mode):
    """With advantages of 0 only the KL term is left: the paper's drop shrinks it, the released drop leaves it."""
    batch = _batch(*SHAPES[0])
    token_mask = batch["token_mask"]
    zero = torch.zeros_like(token_mask)
    mask = torch.ones(token_mask.shape[:2], dtype=torch.float64)
    mask[0, 1:] = 0.0

    def kl_only(weights):
        loss, _ = grpo.grpo_loss(batch["logp"], batch["old_logp"], batch["ref_logp"], zero, token_mask, weights.pg,
                                 weights.kl, kl_coef=1.0, loss_aggregation=mode)
        return loss

    kept_all = kl_only(selection_weights(torch.ones_like(mask), token_mask))
    assert kl_only(selection_weights(mask, token_mask, drop_kl=False)) == kept_all
    assert kl_only(selection_weights(mask, token_mask, drop_kl=True)) != kept_all
