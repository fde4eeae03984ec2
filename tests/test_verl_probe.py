"""The verl backend's probe gradients on a Hugging Face causal LM other than the embedded Qwen2 (a tiny Llama built
here, random weights), against a plain backward per group: each response run alone, unpadded, its log-probs stacked
into [1, K, L], the shared probe loss (prompt_selection.scores.probe_loss), torch.autograd.grad, flattened."""
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from dataflex_rl.backends.verl.probe_gradients import GroupTokens, group_alignment, group_gradients, summed_gradient
from dataflex_rl.prompt_selection.gradients import ParameterLayout
from dataflex_rl.prompt_selection.scores import (aligned_scores, alignment_scores, probe_coefficients, probe_loss,
                                                 zero_advantage)

VOCAB = 23


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         tie_word_embeddings=False, attn_implementation="eager")
    return LlamaForCausalLM(config).float()


def _groups(seed=0, count=4, rollouts=3):
    generator = torch.Generator().manual_seed(seed)

    def ids(n):
        return tuple(torch.randint(1, VOCAB, (n,), generator=generator).tolist())

    return [GroupTokens(ids(int(torch.randint(2, 6, (1,), generator=generator))),
                        tuple(ids(int(torch.randint(1, 7, (1,), generator=generator))) for _ in range(rollouts)))
            for _ in range(count)]


REWARDS = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])


def _plain_loss(model, group, rewards, aggregation):
    """The group's probe loss with every response in its own unpadded forward."""
    width = max(len(r) for r in group.responses)
    logp = torch.zeros(1, len(group.responses), width)
    mask = torch.zeros(1, len(group.responses), width)
    rows = []
    for k, response in enumerate(group.responses):
        ids = torch.tensor([list(group.prompt) + list(response)])
        logits = model(input_ids=ids).logits[0, len(group.prompt) - 1:-1]
        rows.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(response)[:, None])[:, 0])
        mask[0, k, :len(response)] = 1
    logp = torch.stack([torch.nn.functional.pad(r, (0, width - len(r))) for r in rows])[None]
    return probe_loss(logp, rewards[None], mask, aggregation)[0]


def _plain_rows(model, groups, rewards, aggregation):
    parameters = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for group, reward in zip(groups, rewards):
        if zero_advantage(reward[None])[0]:
            rows.append(torch.zeros(sum(p.numel() for p in parameters)))
            continue
        grads = torch.autograd.grad(_plain_loss(model, group, reward, aggregation), parameters)
        rows.append(torch.cat([g.reshape(-1) for g in grads]))
    return torch.stack(rows)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean"])
@pytest.mark.parametrize("micro_batch", [1, 2, 8])
def test_group_gradients_equal_a_plain_backward_per_group(model, aggregation, micro_batch):
    groups = _groups()
    expected = _plain_rows(model, groups, REWARDS, aggregation)
    rows = group_gradients(model, groups, REWARDS, aggregation=aggregation, micro_batch=micro_batch)
    assert rows.shape == (4, ParameterLayout.of(model).size)
    assert torch.count_nonzero(rows[1]) == 0  # all rewards equal: no advantage, not back-propagated
    assert torch.allclose(rows, expected, atol=1e-6, rtol=1e-4)
    assert expected.abs().max() > 1e-3


def test_the_summed_gradient_is_the_gradient_of_the_summed_losses(model):
    groups = _groups(seed=1)
    parameters = [p for p in model.parameters() if p.requires_grad]
    loss = sum(_plain_loss(model, g, r, "token_mean") for g, r in zip(groups, REWARDS))
    expected = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, parameters)])
    assert torch.allclose(summed_gradient(model, groups, REWARDS, micro_batch=2), expected, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("normalise", [True, False])
def test_the_streamed_alignment_gives_the_scores_of_the_full_rows(model, normalise):
    groups = _groups(seed=2)
    rows = _plain_rows(model, groups, REWARDS, "token_mean")
    direction = torch.randn(rows.shape[1], generator=torch.Generator().manual_seed(3))
    direction = direction / direction.norm()
    zero = zero_advantage(REWARDS)
    alignment = group_alignment(model, groups, REWARDS, direction, normalise_candidates=normalise, micro_batch=3)
    assert torch.allclose(alignment.dots, rows @ direction, atol=1e-6, rtol=1e-4)
    assert torch.allclose(alignment.norms, rows.norm(dim=1), atol=1e-6, rtol=1e-4)
    weights = (~zero).float() / 4 / ((rows.norm(dim=1) + 1e-5) if normalise else 1)
    assert torch.allclose(alignment.mean, weights @ rows, atol=1e-7, rtol=1e-4)
    assert torch.allclose(aligned_scores(alignment, zero, normalise_candidates=normalise),
                          alignment_scores(rows, direction, zero, normalise_candidates=normalise), atol=1e-6)


def test_the_model_is_left_as_it_was(model):
    model.train()
    marker = [torch.full_like(p, 0.5) for p in model.parameters()]
    for p, grad in zip(model.parameters(), marker):
        p.grad = grad
    before = [p.detach().clone() for p in model.parameters()]
    group_gradients(model, _groups(), REWARDS)
    assert model.training
    assert all(p.grad is g for p, g in zip(model.parameters(), marker))
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))
    for p in model.parameters():
        p.grad = None
    model.eval()


def test_probe_coefficients_by_hand():
    rewards = torch.tensor([[1.0, 0.0]])
    mask = torch.tensor([[[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]])
    # A = (0.5, −0.5); token_mean: over the group's 4 tokens; seq_mean: over K = 2 responses of 3 and 1 tokens
    assert probe_coefficients(rewards, mask, "token_mean").tolist() == [[[0.125, 0.125, 0.125], [-0.125, 0, 0]]]
    assert torch.allclose(probe_coefficients(rewards, mask, "seq_mean"),
                          torch.tensor([[[0.5 / 6, 0.5 / 6, 0.5 / 6], [-0.25, 0, 0]]]))


def test_mismatched_inputs_are_refused(model):
    with pytest.raises(ValueError, match="one row per group"):
        group_gradients(model, _groups(count=3), REWARDS)
    with pytest.raises(ValueError, match="micro_batch must be"):
        group_gradients(model, _groups(), REWARDS, micro_batch=0)


def test_groups_are_dealt_round_robin_and_empty_shares_left_out():
    from dataflex_rl.backends.verl.probe_shards import shares

    assert shares(5, 2) == [[0, 2, 4], [1, 3]]
    assert shares(2, 3) == [[0], [1]]
    assert shares(0, 4) == []


@pytest.mark.parametrize("devices", [("cpu",), ("cpu", "cpu"), ("cpu", "cpu", "cpu")])
def test_the_round_sharded_over_replicas_gives_the_unsharded_reductions(model, devices):
    """Each replica (a copy of the model per device: two or three on the CPU here, in their own threads) back-propagates
    its share of the groups; put back together they are the one model's rows, sum and alignment. One device is the
    unsharded path itself, bit for bit."""
    from dataflex_rl.backends.verl import probe_shards

    groups, rewards = _groups(seed=4, count=5), torch.cat([REWARDS, torch.tensor([[0.0, 1.0, 1.0]])])
    direction = torch.randn(ParameterLayout.of(model).size, generator=torch.Generator().manual_seed(5))
    direction = direction / direction.norm()
    rows = group_gradients(model, groups, rewards, micro_batch=2)
    summed = summed_gradient(model, groups, rewards, micro_batch=2)
    aligned = group_alignment(model, groups, rewards, direction, normalise_candidates=True, micro_batch=2)
    with probe_shards.replicas(model, devices) as models:
        assert len(models) == len(devices) and len({id(m) for m in models}) == len(devices)
        got_rows = probe_shards.group_gradients(models, groups, rewards, micro_batch=2)
        got_summed = probe_shards.summed_gradient(models, groups, rewards, micro_batch=2)
        got = probe_shards.group_alignment(models, groups, rewards, direction, normalise_candidates=True,
                                           micro_batch=2)
    check = torch.equal if len(devices) == 1 else (lambda a, b: torch.allclose(a, b, atol=1e-7, rtol=1e-5))
    assert check(got_rows, rows) and check(got_summed, summed)
    assert check(got.dots, aligned.dots) and check(got.norms, aligned.norms) and check(got.mean, aligned.mean)
    assert next(model.parameters()).device.type == "cpu"
