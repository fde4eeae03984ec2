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


# The backward pass's memory: gradient checkpointing in train mode with dropout off, and the response log-probs in
# chunks of positions, against the straightforward computation it replaced (eval mode, the window's logits whole).

def _straightforward_rows(model, groups, rewards, micro_batch):
    """Per-group gradients as the probe computed them before: eval mode, no checkpointing, the last width + 1
    positions' logits of each padded micro-batch in fp32, log_softmax, the targets' entries."""
    model.eval()
    parameters = [p for p in model.parameters() if p.requires_grad]
    rows = torch.zeros(len(groups), sum(p.numel() for p in parameters))
    for g, (group, reward) in enumerate(zip(groups, rewards)):
        if zero_advantage(reward[None])[0]:
            continue
        lengths = torch.tensor([len(r) for r in group.responses])
        mask = (torch.arange(int(lengths.max()))[None] < lengths[:, None]).float()
        coefficients = probe_coefficients(reward.float()[None], mask[None], "token_mean")[0]
        grads = [torch.zeros_like(p) for p in parameters]
        for start in range(0, len(group.responses), micro_batch):
            batch = _padded(group, group.responses[start:start + micro_batch])
            width = batch["targets"].shape[1]
            logits = model(input_ids=batch["ids"], attention_mask=batch["attention"]).logits[:, -(width + 1):-1]
            logp = torch.log_softmax(logits.float(), -1).gather(-1, batch["targets"][..., None])[..., 0]
            weight = coefficients[start:start + micro_batch, :width]
            logp = torch.where(weight != 0, logp, torch.zeros_like(logp))
            loss = -(weight * torch.exp(logp - logp.detach())).sum()
            grads = [a + b for a, b in zip(grads, torch.autograd.grad(loss, parameters))]
        rows[g] = torch.cat([grad.reshape(-1) for grad in grads])
    return rows


def _padded(group, responses):
    prompt, width = list(group.prompt), max(len(r) for r in responses)
    ids = torch.zeros(len(responses), len(prompt) + width, dtype=torch.long)
    attention, targets = torch.zeros_like(ids), torch.zeros(len(responses), width, dtype=torch.long)
    for i, response in enumerate(responses):
        ids[i, :len(prompt) + len(response)] = torch.tensor(prompt + list(response))
        attention[i, :len(prompt) + len(response)] = 1
        targets[i, :len(response)] = torch.tensor(response)
    return {"ids": ids, "attention": attention, "targets": targets}


def _dropout_models():
    """A tiny Llama with attention dropout 0.5 (functional, keyed on the attention module's flag) and a tiny GPT-2 with
    every dropout 0.5 (nn.Dropout modules in its embeddings, attention and MLP): a dropout the probe let through
    would change every gradient."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(6)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         tie_word_embeddings=False, attention_dropout=0.5))
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_embd=16, n_layer=2, n_head=4, n_positions=64,
                                      resid_pdrop=0.5, embd_pdrop=0.5, attn_pdrop=0.5,
                                      bos_token_id=1, eos_token_id=2))
    return {"llama": llama.float(), "gpt2": gpt2.float()}


def _state(model):
    return {"training": [m.training for m in model.modules()],
            "dropout": [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)],
            "attention_dropout": getattr(model.config, "attention_dropout", None),
            "use_cache": model.config.use_cache,
            "checkpointing": [(m.__dict__.get("gradient_checkpointing"), m.__dict__.get("_gradient_checkpointing_func"))
                              for m in model.modules()],
            "hooks": [dict(m._forward_hooks) for m in model.modules()],
            "require_grads_hooks": model.__dict__.get("_require_grads_hooks")}


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
@pytest.mark.parametrize("micro_batch, chunk_tokens", [(2, 2), (3, 4), (1, 1), (8, 1024)])
def test_the_checkpointed_chunked_backward_equals_the_eval_mode_full_logits_one(kind, micro_batch, chunk_tokens):
    """Dropout 0.5 everywhere the model has one, chunks smaller than the window (2 tokens of a 2-response
    micro-batch: one position a chunk) and as large as the whole: the gradients are the eval-mode full-logits ones to
    fp32 precision, and the model's flags, dropout rates, checkpointing and hooks are as they were, in train mode as
    in eval mode (the model is left in train mode with one submodule in eval: a mixed state restored per module)."""
    model = _dropout_models()[kind]
    groups = _groups(seed=7)
    expected = _straightforward_rows(model, groups, REWARDS, micro_batch)
    model.train()
    next(iter(model.children())).eval()
    before = _state(model)
    calls = {"layer": 0, "head": 0}
    layer = next(m for m in model.modules() if hasattr(m, "gradient_checkpointing") and m is not model
                 and type(m).__name__.endswith(("DecoderLayer", "Block")))
    # pre-hooks: a non-reentrant recomputation stops once it has the tensors it needs, before a forward hook
    handles = [layer.register_forward_pre_hook(lambda *_: calls.__setitem__("layer", calls["layer"] + 1)),
               model.get_output_embeddings().register_forward_pre_hook(
                   lambda *_: calls.__setitem__("head", calls["head"] + 1))]
    rows = group_gradients(model, groups, REWARDS, micro_batch=micro_batch, chunk_tokens=chunk_tokens)
    for handle in handles:
        handle.remove()
    assert torch.allclose(rows, expected, atol=1e-6, rtol=1e-4), (rows - expected).abs().max()
    assert expected.abs().max() > 1e-3
    assert _state(model) == before and not model.is_gradient_checkpointing
    # each micro-batch's layer runs twice (checkpointed: forward, then recomputed in the backward) and the head twice
    # a chunk; the head-over-decoder check adds two forwards of the layer and of the head
    batches = [group.responses[s:s + micro_batch] for group, reward in zip(groups, REWARDS)
               if not zero_advantage(reward[None])[0] for s in range(0, len(group.responses), micro_batch)]
    positions = [max(1, chunk_tokens // len(batch)) for batch in batches]
    chunks = sum(-(-max(len(r) for r in batch) // p) for batch, p in zip(batches, positions))
    assert calls == {"layer": 2 + 2 * len(batches), "head": 2 + 2 * chunks}


def test_checkpointing_the_model_had_is_given_back():
    """A model whose own (reentrant) checkpointing was on keeps its checkpointing function and input-grad hooks."""
    model = _dropout_models()["llama"]
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.eval()
    before = _state(model)
    embedding_hooks = dict(model.get_input_embeddings()._forward_hooks)
    rows = group_gradients(model, _groups(seed=8), REWARDS, micro_batch=2, chunk_tokens=3)
    assert torch.allclose(rows, _straightforward_rows(model, _groups(seed=8), REWARDS, 2), atol=1e-6, rtol=1e-4)
    assert _state(model) == before and model.is_gradient_checkpointing
    assert dict(model.get_input_embeddings()._forward_hooks) == embedding_hooks


def test_a_model_whose_logits_are_transformed_after_the_head_is_refused(model, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(model.config, "final_logit_softcapping", 30.0, raising=False)
        with pytest.raises(ValueError, match="transforms the logits after the LM head"):
            group_gradients(model, _groups(), REWARDS)
    # a head that is not the one the model's forward applies: its logits over the decoder's states are not the model's
    other = torch.nn.Linear(16, VOCAB, bias=False)
    with monkeypatch.context() as patch:
        patch.setattr(LlamaForCausalLM, "get_output_embeddings", lambda self: other)
        with pytest.raises(ValueError, match="does not give its logits"):
            group_gradients(model, _groups(), REWARDS)
    assert torch.allclose(group_gradients(model, _groups(), REWARDS), _plain_rows(model, _groups(), REWARDS,
                                                                                 "token_mean"), atol=1e-6, rtol=1e-4)


def _qwen3(layers, vocab):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(9)
    config = Qwen3Config(vocab_size=vocab, hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=512,
                         tie_word_embeddings=False)
    return Qwen3ForCausalLM(config).to(torch.bfloat16).eval()


def _saved_bytes(model, run):
    """Bytes autograd keeps for the backward while `run` runs its forwards and backwards: the distinct storages that
    saved_tensors_hooks sees packed, the parameters' left out. A checkpointed region's own tensors are packed by the
    checkpoint and recomputed in the backward, so they are not kept: its inputs are, and are counted."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        run()
    return sum(kept.values())


def _long_group(responses, prompt, width, vocab):
    generator = torch.Generator().manual_seed(10)
    return GroupTokens(tuple(torch.randint(1, vocab, (prompt,), generator=generator).tolist()),
                       tuple(tuple(torch.randint(1, vocab, (width,), generator=generator).tolist())
                             for _ in range(responses)))


def test_the_kept_bytes_no_longer_grow_with_the_vocabulary_and_match_the_memory_model():
    """Two responses of 120 tokens after an 8-token prompt (T = 256 tokens) through a tiny bf16 Qwen3 (H 32, I 48, 4
    heads and 2 KV heads of 8), one micro-batch, chunks of 16 tokens:
    - the straightforward path keeps the window's fp32 log-softmax, B·W·V·4 bytes: 2·120·(1024 − 64)·4 = 921,600 more
      at V = 1024 than at V = 64; the chunked path keeps the same bytes at both;
    - the chunked, checkpointed path keeps T × 2H(L + 4) bytes (probe_settings.probe_memory's held states: each
      layer's bf16 input and the final norm's) and a little more (the ids, targets, the norm's rsqrt);
    - without checkpointing each layer keeps probe_settings.ModelShape.layer_bytes a token: 1408 here."""
    from dataflex_rl.backends.verl.probe_settings import ModelShape

    rewards = torch.tensor([[1.0, 0.0]])
    kept = {}
    for layers in (1, 3):
        for vocab in (64, 1024):
            model = _qwen3(layers, vocab)
            group = [_long_group(2, 8, 120, vocab)]
            kept["old", layers, vocab] = _saved_bytes(model, lambda: _straightforward_rows(model, group, rewards, 2))
            kept["new", layers, vocab] = _saved_bytes(model, lambda: group_gradients(model, group, rewards,
                                                                                   micro_batch=2, chunk_tokens=16))
    tokens, width = 2 * (8 + 120), 120
    for layers in (1, 3):
        assert kept["old", layers, 1024] - kept["old", layers, 64] == 2 * width * (1024 - 64) * 4
        assert kept["new", layers, 1024] == kept["new", layers, 64]
        assert kept["old", layers, 1024] >= 2 * width * 1024 * 4
        held = tokens * 2 * 32 * (layers + 4)
        assert held <= kept["new", layers, 64] <= 1.1 * held
    shape = ModelShape.of(_qwen3(3, 64).config.to_dict())
    assert shape.layer_bytes == 12 * 32 + 8 * 48 + 14 * 32 + 12 * 16 == 1408
    per_layer = (kept["old", 3, 64] - kept["old", 1, 64]) / 2 / tokens
    assert 0.95 * shape.layer_bytes <= per_layer <= 1.05 * shape.layer_bytes
