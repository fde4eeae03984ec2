"""Selection policies, their advantage recomputation, released-code options and matched-random controls.

Expected values are worked out in the comments or found by brute force.
"""
import itertools
import math

import pytest
import torch

from dataflex_rl.training.grpo import group_advantages, grpo_loss
from dataflex_rl.policies import GroupBatch, build_response_policy, list_policies, subset_group_advantages
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.policies.selection import max_variance_subset

SELECTIONS = ["difffilter", "maxvar", "gfpo", "topk"]


def grpo_batch(rewards, lengths=None, max_len=4, prompt_prefix="p", domains=None):
    """A batch whose token advantages are the recipe's GRPO advantages of its rewards."""
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    groups, rollouts = rewards.shape
    lengths = torch.full_like(rewards, 2.0) if lengths is None else torch.as_tensor(lengths, dtype=torch.float32)
    mask = (torch.arange(max_len)[None, None, :] < lengths[..., None]).float()
    advantages = group_advantages(rewards)[..., None] * mask
    return GroupBatch(rewards=rewards, lengths=lengths, token_mask=mask, advantages=advantages,
                      old_logprobs=torch.full_like(mask, math.log(0.5)) * mask,
                      domains=tuple(domains or ["math"] * groups),
                      prompt_ids=tuple(f"{prompt_prefix}{g}" for g in range(groups)))


def random_batch(seed, groups=8, rollouts=5, binary=False):
    g = torch.Generator().manual_seed(seed)
    rewards = (torch.rand(groups, rollouts, generator=g) < 0.4).float() if binary else \
        torch.rand(groups, rollouts, generator=g)
    lengths = torch.randint(1, 7, (groups, rollouts), generator=g).float()
    return grpo_batch(rewards, lengths, max_len=6, prompt_prefix=f"s{seed}-")


def kept_mask(weights):
    return (weights.pg.sum(dim=-1) > 0).float()


def test_the_thirteen_configurations_and_the_prompt_selections_are_registered():
    families = {name: family.name for name, family, _ in list_policies()}
    assert families == {
        "baseline": "none", "difffilter": "selection", "maxvar": "selection", "gfpo": "selection",
        "topk": "selection", "ar": "reweighting", "per": "reweighting", "softmax": "reweighting",
        "diffband": "reweighting", "static": "mixture", "reward_gap": "mixture", "dump_ucb": "mixture",
        "tscl": "mixture", **{name: "prompt_selection" for name in (
            "gradalign", "simacc", "align", "accgreedy", "random_prompts", "validation_set")}}


# --- maxvar -------------------------------------------------------------------------------------------------------

def _population_variance(values):
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


@pytest.mark.parametrize("seed", range(12))
def test_maxvar_equals_exhaustive_search(seed):
    g = torch.Generator().manual_seed(seed)
    groups = int(torch.randint(1, 9, (1,), generator=g))
    kind = seed % 3  # continuous, binary, coarse (many ties)
    rewards = torch.rand(groups, 5, generator=g, dtype=torch.float64)
    if kind == 1:
        rewards = (rewards < 0.5).double()
    elif kind == 2:
        rewards = (rewards * 4).floor() / 4
    for keep in range(1, 6):
        mask = max_variance_subset(rewards, keep)
        assert mask.sum(dim=1).tolist() == [keep] * groups
        for row, row_mask in zip(rewards.tolist(), mask.tolist()):
            best = max(_population_variance(list(c)) for c in itertools.combinations(row, keep))
            chosen = [r for r, m in zip(row, row_mask) if m]
            assert _population_variance(chosen) == pytest.approx(best, abs=1e-12)


def test_maxvar_by_hand_with_recomputed_advantages():
    # Group 0 sorted: 0, .3, .4, .9, 1 (indices 0, 3, 1, 4, 2). keep 3 = a lowest + (3 − a) highest:
    #   a=0 {.4, .9, 1}: var .0689; a=1 {0, .9, 1}: var .2022; a=2 {0, .3, 1}: var .1756; a=3 {0, .3, .4}: .0289.
    #   → a=1: indices 0, 4, 2. Recomputed over {0, 1, .9}: mean .63333, unbiased std sqrt(.30333) = .55076
    #   → A = −.63333/.55076 = −1.14992, .36667/.55076 = .66575, .26667/.55076 = .48418.
    # Group 1 binary [1, 0, 0, 1, 0] sorted 0, 0, 0, 1, 1 (indices 1, 2, 4, 0, 3): a=0 {0, 1, 1} and a=1 {0, 0, 1}
    #   tie at 2/9 → the smallest a wins → highest three: indices 4, 0, 3. Over {1, 1, 0}: mean 2/3,
    #   std sqrt((1/9 + 1/9 + 4/9)/2) = sqrt(1/3) → A = ±(1/3)/.57735 = .57735 for the ones, −1.15470 for the zero.
    batch = grpo_batch([[0.0, 0.4, 1.0, 0.3, 0.9], [1.0, 0.0, 0.0, 1.0, 0.0]])
    weights = build_response_policy("maxvar", {}).weigh(batch)
    assert kept_mask(weights).tolist() == [[1, 0, 1, 0, 1], [1, 0, 0, 1, 1]]
    torch.testing.assert_close(weights.pg, weights.kl)
    expected = torch.tensor([[-1.14992, 0.0, 0.66575, 0.0, 0.48418], [0.57735, 0.0, 0.0, 0.57735, -1.15470]])
    torch.testing.assert_close(weights.advantages, expected[..., None] * weights.pg, atol=2e-5, rtol=0)
    assert weights.kept_fraction == pytest.approx(0.6)


def test_maxvar_released_semantics_keeps_two_of_five_and_the_batch_advantages():
    # The released scripts' keep_fraction 0.5 → Python round(2.5) = 2; no recomputation, dropped keep their KL.
    batch = grpo_batch([[0.0, 0.4, 1.0, 0.3, 0.9]])
    weights = build_response_policy("maxvar", {"semantics": "dataflex_released"}).weigh(batch)
    # keep 2: a=0 {.9, 1} var .0025, a=1 {0, 1} var .25, a=2 {0, .3} → indices 0 and 2.
    assert kept_mask(weights).tolist() == [[1, 0, 1, 0, 0]]
    assert weights.advantages is None
    torch.testing.assert_close(weights.kl, batch.token_mask)
    # Either knob can be set on its own.
    mixed = build_response_policy("maxvar", {"semantics": "dataflex_released", "keep": 3, "advantages": "recompute"})
    assert kept_mask(mixed.weigh(batch)).sum() == 3 and mixed.weigh(batch).advantages is not None


# --- gfpo ---------------------------------------------------------------------------------------------------------

def test_gfpo_keeps_top_three_by_efficiency_and_recomputes_advantages():
    # Group 0: r/L = 1/4, .5/1, 0/1, 1/8, .2/2 = .25, .5, 0, .125, .1 → top 3: indices 1, 0, 3.
    #   Kept rewards {1, .5, 1}: mean 5/6, deviations 1/6, −1/3, 1/6; unbiased var (1/36 + 1/9 + 1/36)/2 = 1/12,
    #   std .288675 → A = .57735, −1.15470, .57735 (the full-group advantages would differ: r=1 → 1.02).
    # Group 1: all rewards 0 → every r/L ties at 0 → the first three positions, advantages 0.
    batch = grpo_batch([[1.0, 0.5, 0.0, 1.0, 0.2], [0.0] * 5], lengths=[[4, 1, 1, 8, 2], [2] * 5], max_len=8)
    weights = build_response_policy("gfpo", {}).weigh(batch)
    assert kept_mask(weights).tolist() == [[1, 1, 0, 1, 0], [1, 1, 1, 0, 0]]
    expected = torch.tensor([[0.57735, -1.15470, 0.0, 0.57735, 0.0], [0.0] * 5])
    torch.testing.assert_close(weights.advantages, expected[..., None] * weights.pg, atol=2e-5, rtol=0)
    assert weights.info["zero_advantage_kept"] == 3  # the all-failed group's three survivors carry no PG signal
    assert weights.info["kept_responses"] == 6 and weights.info["single_kept_groups"] == 0
    # The released code keeps the full-group advantages and the dropped responses' KL.
    released = build_response_policy("gfpo", {"semantics": "dataflex_released"}).weigh(batch)
    torch.testing.assert_close(released.pg, weights.pg)
    assert released.advantages is None
    torch.testing.assert_close(released.kl, batch.token_mask)


@pytest.mark.parametrize("seed", range(4))
def test_gfpo_keeps_exactly_k_per_group(seed):
    batch = random_batch(seed)
    for keep in (1, 2, 3, 4):
        weights = build_response_policy("gfpo", {"keep": keep}).weigh(batch)
        assert kept_mask(weights).sum(dim=1).tolist() == [keep] * 8
    assert kept_mask(build_response_policy("gfpo", {"keep": 7}).weigh(batch)).sum() == 40  # K ≤ keep: all kept
    # metric "length": the shortest responses.
    short = build_response_policy("gfpo", {"metric": "length", "keep": 2}).weigh(batch)
    kept_lengths = torch.where(kept_mask(short) > 0, batch.lengths, -torch.inf).amax(dim=1)
    dropped_lengths = torch.where(kept_mask(short) > 0, torch.inf, batch.lengths).amin(dim=1)
    assert (kept_lengths <= dropped_lengths).all()


def test_a_group_with_one_kept_response_gets_advantage_zero():
    batch = grpo_batch([[1.0, 0.0, 0.0, 1.0, 0.0], [0.5, 1.0, 0.0, 0.2, 0.1]])
    weights = build_response_policy("gfpo", {"keep": 1}).weigh(batch)
    assert kept_mask(weights).sum(dim=1).tolist() == [1, 1]
    assert torch.count_nonzero(weights.advantages) == 0  # recomputed over one response: no comparison, no signal
    assert weights.info["single_kept_groups"] == 2 and weights.info["zero_advantage_kept"] == 2
    logp = torch.full_like(batch.token_mask, -1.0, requires_grad=True)
    loss, _ = grpo_loss(logp, logp.detach(), logp.detach() + 0.5, weights.advantages, batch.token_mask,
                        weights.pg, weights.kl)
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(logp.grad).all()


def test_subset_advantages_with_everything_kept_equal_the_recipe():
    rewards = random_batch(3).rewards
    torch.testing.assert_close(subset_group_advantages(rewards, torch.ones_like(rewards)), group_advantages(rewards))
    # Nothing kept → zeros, never NaN.
    assert torch.count_nonzero(subset_group_advantages(rewards, torch.zeros_like(rewards))) == 0


# --- topk ---------------------------------------------------------------------------------------------------------

def _topk_batch():
    # a = mean |A| per response (make the advantages directly): group 0 large, group 1 small.
    a = torch.tensor([[4.0, 1.0, 3.0, 2.0], [0.5, 0.8, 0.1, 0.9], [5.0, 0.2, 0.3, 6.0]])
    batch = grpo_batch(torch.zeros(3, 4))
    return GroupBatch(batch.rewards, batch.lengths, batch.token_mask, a[..., None] * batch.token_mask,
                      batch.old_logprobs, batch.domains, batch.prompt_ids)


def test_topk_per_group_keeps_half_of_every_group():
    weights = build_response_policy("topk", {}).weigh(_topk_batch())  # paper: per group
    # Top 2 of 4 per group: {4, 3}, {.9, .8}, {6, 5}.
    assert kept_mask(weights).tolist() == [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1]]
    assert weights.kept_fraction == 0.5 and weights.advantages is None


def test_topk_global_keeps_half_of_the_batch_as_the_released_code():
    # Top 6 of 12 over the batch: 6, 5, 4, 3, 2, 1 — group 1 loses every response.
    expected = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 1]]
    released = build_response_policy("topk", {"semantics": "dataflex_released"}).weigh(_topk_batch())
    assert kept_mask(released).tolist() == expected
    torch.testing.assert_close(released.kl, _topk_batch().token_mask)  # released: dropped keep their KL
    explicit = build_response_policy("topk", {"scope": "global"}).weigh(_topk_batch())
    assert kept_mask(explicit).tolist() == expected and explicit.kept_fraction == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_topk_keeps_half_on_random_batches(seed):
    batch = random_batch(seed, groups=6, rollouts=4)
    per_group = kept_mask(build_response_policy("topk", {"scope": "per_group"}).weigh(batch))
    assert per_group.sum(dim=1).tolist() == [2] * 6
    assert kept_mask(build_response_policy("topk", {"scope": "global"}).weigh(batch)).sum() == 12
    # The kept responses are the largest: every kept a ≥ every dropped a (globally).
    a = batch.mean_abs_advantage()
    glob = kept_mask(build_response_policy("topk", {"scope": "global"}).weigh(batch)) > 0
    assert a[glob].min() >= a[~glob].max()


def test_topk_counts_on_odd_sizes():
    batch = random_batch(0, groups=1, rollouts=5)
    # Half of 5: the paper rounds halves up (3), the released code's round() to even (2).
    assert kept_mask(build_response_policy("topk", {}).weigh(batch)).sum() == 3
    released = build_response_policy("topk", {"semantics": "dataflex_released"}).weigh(batch)
    assert kept_mask(released).sum() == 2


def test_all_zero_advantages_keep_a_defined_half_and_are_logged():
    batch = grpo_batch([[1.0, 1.0, 1.0, 1.0], [0.0] * 4])  # saturated groups: every advantage 0
    weights = build_response_policy("topk", {}).weigh(batch)
    assert kept_mask(weights).tolist() == [[1, 1, 0, 0], [1, 1, 0, 0]]  # ties: earliest positions
    assert weights.info["zero_advantage_kept"] == 4 and weights.info["kept_responses"] == 4


def test_all_groups_dropped_is_defined_with_recomputed_advantages():
    batch = grpo_batch([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    weights = build_response_policy("difffilter", {"advantages": "recompute"}).weigh(batch)
    assert weights.kept_fraction == 0.0 and weights.info["all_dropped"] is True
    assert torch.count_nonzero(weights.advantages) == 0 and torch.count_nonzero(weights.pg) == 0
    logp = torch.full_like(batch.token_mask, -1.0, requires_grad=True)
    loss, _ = grpo_loss(logp, logp.detach(), logp.detach() + 1.0, weights.advantages, batch.token_mask,
                        weights.pg, weights.kl)
    assert loss.item() == 0.0


# --- matched-random controls --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SELECTIONS)
@pytest.mark.parametrize("scope", ["batch", "per_group"])
def test_random_control_matches_the_kept_count_and_is_deterministic(name, scope):
    batch = random_batch(7, groups=8, rollouts=5)
    policy = build_response_policy(name, {}).weigh(batch)
    params = {"control": "random", "seed": 11, "control_scope": scope}
    control = build_response_policy(name, params).weigh(batch)
    again = build_response_policy(name, dict(params)).weigh(batch)
    torch.testing.assert_close(control.pg, again.pg)
    assert control.kept_fraction == policy.kept_fraction
    if scope == "per_group":
        assert kept_mask(control).sum(dim=1).tolist() == kept_mask(policy).sum(dim=1).tolist()
    # The control converts its mask exactly as the policy does: same KL rule, recomputation iff the policy does it.
    assert (control.advantages is None) == (policy.advantages is None)
    torch.testing.assert_close(control.pg, control.kl)


def test_random_control_depends_on_seed_and_prompts_only():
    batch = random_batch(1, groups=8, rollouts=5)
    def mask(params, b=batch):
        return kept_mask(build_response_policy("gfpo", {"control": "random", **params}).weigh(b))
    assert not torch.equal(mask({"seed": 1}), mask({"seed": 2}))
    other_prompts = GroupBatch(batch.rewards, batch.lengths, batch.token_mask, batch.advantages, batch.old_logprobs,
                               batch.domains, tuple(f"q{g}" for g in range(8)))
    assert not torch.equal(mask({"seed": 1}), mask({"seed": 1}, other_prompts))
    # Same prompts, different rewards (gfpo still keeps 3 per group): the same random responses are kept.
    shuffled = random_batch(2, groups=8, rollouts=5)
    same_prompts = GroupBatch(shuffled.rewards, shuffled.lengths, shuffled.token_mask, shuffled.advantages,
                              shuffled.old_logprobs, batch.domains, batch.prompt_ids)
    assert torch.equal(mask({"seed": 1}), mask({"seed": 1}, same_prompts))
    # No global RNG involved.
    torch.manual_seed(0)
    first = mask({"seed": 5})
    torch.manual_seed(123)
    assert torch.equal(first, mask({"seed": 5}))


def test_random_control_of_difffilter_spreads_over_the_batch():
    # difffilter keeps whole groups; its batch-scope control keeps as many responses, anywhere.
    batch = grpo_batch([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0] * 5, [1] * 5, [0, 1, 0, 1, 0], [0] * 5], max_len=2)
    policy = build_response_policy("difffilter", {}).weigh(batch)
    control = build_response_policy("difffilter", {"control": "random", "seed": 3}).weigh(batch)
    assert kept_mask(control).sum() == kept_mask(policy).sum() == 10
    assert not torch.equal(kept_mask(control), kept_mask(policy))


# --- options ------------------------------------------------------------------------------------------------------

def test_selection_options_are_validated():
    with pytest.raises(ValueError, match="recompute"):
        build_response_policy("gfpo", {"advantages": "fresh"})
    with pytest.raises(ValueError, match="random"):
        build_response_policy("gfpo", {"control": "shuffle"})
    with pytest.raises(ValueError, match="control: random"):
        build_response_policy("gfpo", {"control_scope": "batch"})
    with pytest.raises(ValueError, match="dataflex_released"):
        build_response_policy("maxvar", {"semantics": "as_run"})
    with pytest.raises(ValueError, match="keep"):
        build_response_policy("gfpo", {"kept": 3})
    with pytest.raises(ValueError, match="scope"):
        build_response_policy("topk", {"scope": "groups"}).weigh(random_batch(0))


def test_paper_and_released_option_defaults():
    paper = build_response_policy("gfpo", {}).options
    assert paper == {"semantics": "paper", "drop_kl": True, "advantages": "recompute", "control": "none",
                     "control_scope": "batch", "seed": 0}
    released = build_response_policy("gfpo", {"semantics": "dataflex_released"}).options
    assert released["drop_kl"] is False and released["advantages"] == "keep"
    assert build_response_policy("difffilter", {}).options["advantages"] == "keep"
    assert build_response_policy("topk", {}).options["advantages"] == "keep"
    assert build_response_policy("baseline", {"semantics": "dataflex_released"}).family is Family.none


def test_the_documented_example_policy_registers_and_runs(monkeypatch):
    from pathlib import Path

    from dataflex_rl.policies import catalogue, registry

    docs = (Path(__file__).resolve().parents[1] / "docs" / "policies.md").read_text()
    section = docs.split("## Adding a selection policy", 1)[1]
    entry, code = (block.split("```", 1)[0] for block in section.split("```python")[1:3])
    monkeypatch.setitem(catalogue.CATALOGUE, "longest_correct", eval(entry, vars(catalogue)))
    try:
        exec(compile(code, "docs/policies.md", "exec"), {})
        batch = grpo_batch([[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0]], lengths=[[1, 3, 4, 2], [4, 4, 4, 1]])
        # Group 0: solved responses of lengths 1, 3, 2 → the longest two: indices 1, 3. Group 1: only index 3 solved.
        assert kept_mask(build_response_policy("longest_correct", {"keep": 2}).weigh(batch)).tolist() == [
            [0, 1, 0, 1], [0, 0, 0, 1]]
        control = build_response_policy("longest_correct", {"keep": 2, "control": "random", "seed": 3}).weigh(batch)
        assert kept_mask(control).sum() == 3
    finally:
        registry._REGISTRY.pop("longest_correct", None)
