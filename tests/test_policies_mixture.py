"""dump_ucb and tscl: hand values, direct re-computation from their definitions, released-code variants, state."""
import json
import math

import numpy as np
import pytest
import torch

from dataflex_rl.training.grpo import group_advantages
from dataflex_rl.policies import GroupBatch, build_mixture

DOMAINS = ["math", "logic", "science"]
RELEASED = {"semantics": "dataflex_released"}


def batch_of(domains, rewards, response_adv=None):
    """One group per domain entry; advantages are the recipe's (or given per response); every response 2 tokens."""
    rewards = torch.tensor(rewards, dtype=torch.float32)
    mask = torch.ones(*rewards.shape, 2)
    adv = group_advantages(rewards) if response_adv is None else torch.tensor(response_adv, dtype=torch.float32)
    return GroupBatch(rewards=rewards, lengths=mask.sum(-1), token_mask=mask, advantages=adv[..., None] * mask,
                      old_logprobs=torch.zeros_like(mask), domains=tuple(domains),
                      prompt_ids=tuple(f"p{i}" for i in range(len(domains))))


def feedback_sequence(steps=14, seed=0):
    """Seeded batches of 4 groups × K=5 binary rewards; domain skill differs; science is missing from some steps."""
    g = torch.Generator().manual_seed(seed)
    skill = {"math": 0.25, "logic": 0.55, "science": 0.8}
    batches = []
    for step in range(steps):
        domains = [DOMAINS[int(i)] for i in torch.randint(0, 3 if step % 3 else 2, (4,), generator=g)]
        rewards = [(torch.rand(5, generator=g) < skill[d] + 0.02 * step).float().tolist() for d in domains]
        batches.append(batch_of(domains, rewards))
    return batches


def run(name, params, batches, domains=DOMAINS):
    mix = build_mixture(name, domains, params)
    for batch in batches:
        mix.observe(batch)
    return mix


def softmax(x, temperature):
    z = np.exp((np.asarray(x, dtype=np.float64) - max(x)) / temperature)
    return z / z.sum()


# --- dump_ucb -----------------------------------------------------------------------------------------------------

def test_dump_ucb_by_hand():
    mix = build_mixture("dump_ucb", ["a", "b"], {})
    assert mix.probabilities() == pytest.approx({"a": 0.5, "b": 0.5})  # no feedback: every UCB is 0
    mix.observe(batch_of(["a"], [[1.0, 0.0]], response_adv=[[1.0, -1.0]]))
    # μ_a = mean |A| = 1 over n_a = 2 responses; μ_b = 0, n_b = 0; N = 2.
    # UCB_a = 1 + sqrt(2 ln 3 / 3) = 1.855809; UCB_b = sqrt(2 ln 3 / 1) = 1.482304.
    ucb_a, ucb_b = 1 + math.sqrt(2 * math.log(3) / 3), math.sqrt(2 * math.log(3))
    assert mix.scores() == pytest.approx({"a": ucb_a, "b": ucb_b})
    # T = 0.1: p_a = 1 / (1 + exp(−(UCB_a − UCB_b)/0.1)) = 1 / (1 + e^−3.735) = 0.97669.
    p_a = 1 / (1 + math.exp(-(ucb_a - ucb_b) / 0.1))
    assert mix.probabilities() == pytest.approx({"a": p_a, "b": 1 - p_a})
    assert p_a == pytest.approx(0.97669, abs=1e-5)


@pytest.mark.parametrize("window", [300, 7])
def test_dump_ucb_matches_its_definition_on_a_feedback_sequence(window):
    batches = feedback_sequence()
    history = {d: [] for d in DOMAINS}
    for batch in batches:
        for domain, values in zip(batch.domains, batch.mean_abs_advantage().tolist()):
            history[domain].extend(values)
    seen = sum(len(h) for h in history.values())
    ucb = [(np.mean(history[d][-window:]) if history[d] else 0.0)
           + 1.0 * math.sqrt(2 * math.log(seen + 1) / (len(history[d]) + 1)) for d in DOMAINS]
    expected = softmax(ucb, 0.1)
    mix = run("dump_ucb", {"window": window}, batches)
    assert [mix.probabilities()[d] for d in DOMAINS] == pytest.approx(expected.tolist(), abs=1e-12)
    assert mix.state_dict()["counts"] == {d: len(history[d]) for d in DOMAINS}


def test_released_mixers_match_softmax_of_windowed_mean_reward():
    batches = feedback_sequence(steps=20)  # > 50 responses per domain: the window truncates
    rewards = {d: [] for d in DOMAINS}
    for batch in batches:
        for domain, row in zip(batch.domains, batch.rewards.tolist()):
            rewards[domain].extend(row)
    assert min(len(r) for r in rewards.values()) > 50
    means = [np.mean(rewards[d][-50:]) for d in DOMAINS]
    p = softmax(means, 1.0)
    p = np.maximum(p, 0.05) / np.maximum(p, 0.05).sum()
    for name in ("dump_ucb", "tscl"):
        mix = run(name, RELEASED, batches)
        assert [mix.probabilities()[d] for d in DOMAINS] == pytest.approx(p.tolist(), abs=1e-12)
    # The floor binds at a sharper temperature: max(p, 0.05) renormalised, so a floored domain ends below 0.05.
    sharp = run("dump_ucb", {**RELEASED, "temperature": 0.05}, batches).probabilities()
    raw = softmax(means, 0.05)
    floored = np.maximum(raw, 0.05) / np.maximum(raw, 0.05).sum()
    assert raw.min() < 0.05 and [sharp[d] for d in DOMAINS] == pytest.approx(floored.tolist(), abs=1e-12)


def test_faithful_and_released_dump_ucb_differ_on_the_same_feedback():
    batches = feedback_sequence()
    faithful = run("dump_ucb", {}, batches).probabilities()
    released = run("dump_ucb", RELEASED, batches).probabilities()
    assert max(abs(faithful[d] - released[d]) for d in DOMAINS) > 0.05


def test_released_dump_ucb_equals_released_tscl():
    batches = feedback_sequence(steps=20)
    dump, tscl = build_mixture("dump_ucb", DOMAINS, RELEASED), build_mixture("tscl", DOMAINS, RELEASED)
    assert dump.probabilities() == tscl.probabilities()
    for batch in batches:  # equal after every step, not just at the end
        dump.observe(batch)
        tscl.observe(batch)
        assert dump.probabilities() == tscl.probabilities()
    # …while their paper versions are different policies.
    assert run("dump_ucb", {}, batches).probabilities() != run("tscl", {}, batches).probabilities()


# --- tscl ---------------------------------------------------------------------------------------------------------

def _tscl_hand_sequence():
    return [
        batch_of(["math", "logic"], [[1, 0, 0, 0, 0], [1, 0, 1, 0, 0.5]]),       # t=0: math .2, logic .5
        batch_of(["math", "logic", "math"], [[1, 1, 0, 0, 0], [0, 1, 0, 1, 0.5], [1, 0, 1, 0, 0]]),  # t=1: .4, .5
        batch_of(["math"], [[1, 1, 1, 1, 0]]),                                     # t=2: math .8, no logic
    ]


def test_tscl_by_hand():
    params = {"window": 3, "epsilon": 0.1}
    mix = build_mixture("tscl", ["math", "logic"], params)
    assert mix.probabilities() == pytest.approx({"math": 0.5, "logic": 0.5})  # < 2 records: progress 1 each, a tie
    for batch in _tscl_hand_sequence():
        mix.observe(batch)
    # math (0, .2), (1, .4), (2, .8): slope = [(−1)(−.26667) + 0 + (1)(.33333)] / 2 = 0.3. logic (0, .5), (1, .5): 0.
    assert mix.progress() == pytest.approx({"math": 0.3, "logic": 0.0})
    # ε-greedy: best gets 1 − ε + ε/2 = 0.95, the other ε/2 = 0.05.
    assert mix.probabilities() == pytest.approx({"math": 0.95, "logic": 0.05})
    boltzmann = build_mixture("tscl", ["math", "logic"], {**params, "policy": "boltzmann", "temperature": 0.1})
    for batch in _tscl_hand_sequence():
        boltzmann.observe(batch)
    # softmax(0.3/0.1, 0) → 1/(1 + e^−3) = 0.952574.
    assert boltzmann.probabilities()["math"] == pytest.approx(1 / (1 + math.exp(-3)))
    # t=3: math 0 → window of 3 keeps (1, .4), (2, .8), (3, 0): slope [(−1)(0) + 0 + (1)(−.4)]/2 = −0.2.
    mix.observe(batch_of(["math"], [[0, 0, 0, 0, 0]]))
    assert mix.progress()["math"] == pytest.approx(0.2)  # |slope|: forgetting also deserves practice
    signed = build_mixture("tscl", ["math", "logic"], {**params, "absolute": False})
    for batch in _tscl_hand_sequence() + [batch_of(["math"], [[0, 0, 0, 0, 0]])]:
        signed.observe(batch)
    assert signed.progress()["math"] == pytest.approx(-0.2)
    assert signed.probabilities() == pytest.approx({"math": 0.05, "logic": 0.95})


@pytest.mark.parametrize("policy", ["epsilon_greedy", "boltzmann"])
def test_tscl_matches_its_definition_on_a_feedback_sequence(policy):
    batches = feedback_sequence()
    records = {d: [] for d in DOMAINS}
    for t, batch in enumerate(batches):
        per_domain = {}
        for domain, row in zip(batch.domains, batch.rewards.tolist()):
            per_domain.setdefault(domain, []).extend(row)
        for domain, rewards in per_domain.items():
            records[domain].append((t, np.mean(rewards)))
    progress = []
    for d in DOMAINS:
        last = records[d][-10:]
        progress.append(abs(np.polyfit([x for x, _ in last], [y for _, y in last], 1)[0]) if len(last) >= 2 else 1.0)
    if policy == "boltzmann":
        expected = softmax(progress, 0.02)
        params = {"policy": "boltzmann", "temperature": 0.02}
    else:
        expected = np.full(3, 0.1 / 3)
        expected[int(np.argmax(progress))] += 0.9
        params = {}
    mix = run("tscl", params, batches)
    assert [mix.progress()[d] for d in DOMAINS] == pytest.approx(progress, abs=1e-12)
    assert [mix.probabilities()[d] for d in DOMAINS] == pytest.approx(expected.tolist(), abs=1e-9)


def test_tscl_window_counts_steps_and_the_released_window_counts_responses():
    batches = feedback_sequence(steps=20)
    paper = run("tscl", {}, batches)
    assert all(len(h) <= 10 for h in paper.state_dict()["history"].values())
    released = run("tscl", RELEASED, batches)
    assert all(len(w) == 50 for w in released.state_dict()["reward_windows"].values())


# --- state, validation --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, params", [
    ("dump_ucb", {}), ("dump_ucb", {"window": 5}), ("dump_ucb", RELEASED), ("tscl", {}),
    ("tscl", {"policy": "boltzmann", "temperature": 0.05}), ("tscl", RELEASED), ("reward_gap", {}), ("static", {}),
])
def test_mixture_state_round_trips_and_resumes_identically(name, params):
    batches = feedback_sequence()
    uninterrupted = run(name, params, batches)
    first = run(name, params, batches[:6])
    resumed = build_mixture(name, DOMAINS, params)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert resumed.state_dict() == first.state_dict()
    for batch in batches[6:]:
        resumed.observe(batch)
    assert resumed.probabilities() == uninterrupted.probabilities()
    assert resumed.state_dict() == uninterrupted.state_dict()


def test_mixture_state_refuses_another_semantics_and_unknown_domains():
    state = run("dump_ucb", {}, feedback_sequence(steps=3)).state_dict()
    with pytest.raises(ValueError, match="semantics"):
        build_mixture("dump_ucb", DOMAINS, RELEASED).load_state_dict(state)
    for name, params in (("dump_ucb", {}), ("tscl", {}), ("tscl", RELEASED)):
        with pytest.raises(ValueError, match="not one of"):
            build_mixture(name, ["math"], params).observe(batch_of(["logic"], [[1, 0]]))


def test_mixture_parameters_are_validated():
    with pytest.raises(ValueError, match="policy"):
        build_mixture("tscl", DOMAINS, {"policy": "thompson"})
    with pytest.raises(ValueError, match="window"):
        build_mixture("tscl", DOMAINS, {"window": 1})
    with pytest.raises(ValueError, match="temperature"):
        build_mixture("dump_ucb", DOMAINS, {"temperature": 0.0})
    with pytest.raises(ValueError, match="floor"):
        build_mixture("dump_ucb", DOMAINS, {"floor": 0.5})
    with pytest.raises(ValueError, match="dataflex_released"):
        build_mixture("tscl", DOMAINS, {"semantics": "released"})
    with pytest.raises(ValueError, match="window"):
        build_mixture("dump_ucb", DOMAINS, {"windw": 3})


def test_probabilities_stay_finite_and_sum_to_one():
    batches = feedback_sequence(steps=6) + [batch_of(["math"] * 3, [[1.0] * 5] * 3)] * 40  # saturated: |A| = 0
    for name, params in (("dump_ucb", {}), ("dump_ucb", RELEASED), ("tscl", {}), ("tscl", RELEASED),
                         ("tscl", {"policy": "boltzmann"})):
        p = run(name, params, batches).probabilities()
        assert all(math.isfinite(v) and v >= 0 for v in p.values()) and sum(p.values()) == pytest.approx(1.0)
