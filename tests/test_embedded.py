"""The embedded backend: decoding, shared-prefix log-probs, determinism and resume of the GRPO trainer."""
import json

import pandas as pd
import pytest
import torch

from dataflex_rl.backends.embedded.base_model import build_base_model
from dataflex_rl.backends.embedded.generation import decode, left_pad
from dataflex_rl.backends.embedded.model import load_model
from dataflex_rl.backends.embedded.sequences import response_logprobs
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.artefacts.items import item_metadata
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.regimes.noisy_rewards import NOISY_REWARD_KEY
from dataflex_rl.corpus.build import build_corpus

TEMPLATE = "{question}\nAnswer:"
SHAPE = ModelShape(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, vocab_size=384)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("embedded")
    corpus, _ = build_corpus(["basic_arithmetic", "syllogism", "kinematics"], 60, seed=1)
    corpus.to_parquet(root / "corpus.parquet")
    build_base_model(root / "corpus.parquet", root / "base", SHAPE, WarmupSettings(steps=5, batch_size=8), TEMPLATE,
                     progress=False)
    return root, corpus


def test_greedy_decode_matches_transformers_generate(workspace):
    root, _ = workspace
    model, tok = load_model(root / "base")
    prompts = [tok("Calculate 4 - 1.\nAnswer:").input_ids, tok("Consider these statements").input_ids]
    ours = decode(model, prompts, max_new_tokens=6, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id)
    ids, mask = left_pad(prompts, tok.pad_token_id)
    reference = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                               pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)[:, ids.shape[1]:]
    width = ours.response_ids.shape[1]
    generated = reference[:, :width]
    assert torch.equal(ours.response_ids[ours.response_mask.bool()], generated[ours.response_mask.bool()])


def test_shared_prefix_logprobs_equal_full_sequence_logprobs(workspace):
    root, _ = workspace
    model, tok = load_model(root / "base")
    prompts = [tok(p).input_ids for p in ["Calculate 12 + 7.\nAnswer:", "A cart moves at 3 m/s.\nAnswer:"]]
    k = 4
    out = decode(model, prompts, max_new_tokens=5, eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, repeats=k,
                 generator=torch.Generator().manual_seed(0))
    shared = response_logprobs(model, out.prompt_ids, out.prompt_mask, out.response_ids, out.response_mask, repeats=k)
    full = response_logprobs(model, out.prompt_ids.repeat_interleave(k, 0), out.prompt_mask.repeat_interleave(k, 0),
                             out.response_ids, out.response_mask)
    assert torch.allclose(shared, full, atol=1e-5)


def assert_same_weights(a, b):
    for (name, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        assert torch.equal(x, y), name


def _trainer(root, corpus, method=MethodSpec("baseline", "baseline", {}, Family.none), steps=4, seed=7):
    settings = GRPOSettings(steps=steps, prompts_per_step=4, rollouts=5, max_new_tokens=4, checkpoint_every=2)
    return EmbeddedGRPOTrainer(root / "base", corpus, method, seed, settings, TEMPLATE)


@pytest.mark.parametrize("method", [MethodSpec("baseline", "baseline", {}, Family.none),
                                    MethodSpec("static", "static", {}, Family.mixture)])
def test_same_seed_gives_identical_metrics_and_weights(workspace, tmp_path, method):
    root, corpus = workspace
    first, second = _trainer(root, corpus, method), _trainer(root, corpus, method)
    a = first.train(tmp_path / "a", progress=False).drop(columns="seconds")
    b = second.train(tmp_path / "b", progress=False).drop(columns="seconds")
    pd.testing.assert_frame_equal(a, b)
    assert_same_weights(first, second)


def test_resume_from_checkpoint_is_bit_identical(workspace, tmp_path):
    root, corpus = workspace
    straight = _trainer(root, corpus)
    expected = straight.train(tmp_path / "straight", progress=False).drop(columns="seconds")

    interrupted = _trainer(root, corpus, steps=2)  # stops after the step-2 checkpoint, as a killed job would
    interrupted.train(tmp_path / "resumed", progress=False)
    resumed = _trainer(root, corpus)
    assert resumed.step == 0
    got = resumed.train(tmp_path / "resumed", progress=False).drop(columns="seconds")
    pd.testing.assert_frame_equal(got, expected)
    assert_same_weights(resumed, straight)


def test_metrics_record_policy_effects(workspace, tmp_path):
    root, corpus = workspace
    trainer = _trainer(root, corpus, MethodSpec("difffilter", "difffilter", {"low": 0.2, "high": 0.8}, Family.selection))
    metrics = trainer.train(tmp_path / "s", progress=False)
    expected_columns = {"mean_reward", "degenerate_group_fraction", "kept_fraction", "p:math", "p:logic", "p:science"}
    assert expected_columns <= set(metrics.columns)
    # difffilter keeps exactly the non-degenerate groups of binary rewards with K=5 (q in {0.4, 0.6}) — never more
    assert (metrics["kept_fraction"] <= 1 - metrics["degenerate_group_fraction"] + 1e-9).all()


def test_the_loss_aggregation_setting_reaches_the_loss(workspace, tmp_path):
    """At step 0 the policy is the reference and on-policy (ρ = 1, KL 0), so the loss is −Σ A·(a token's share).
    Under Eq. 1 each response is averaged over its own tokens, so a group's advantages, which sum to 0, cancel; under
    token-mean a response weighs by its length, so groups with a reward spread and unequal lengths leave a loss.
    Bernoulli(0.5) rewards on every prompt (the noisy-rewards regime's mark) give the spread."""
    root, corpus = workspace
    noisy = corpus.assign(metadata=[json.dumps({**item_metadata(row), NOISY_REWARD_KEY: 0.5})
                                    for row in corpus.to_dict("records")])
    first_step = {}
    for mode in ("seq-mean-token-mean", "token-mean"):
        settings = GRPOSettings(steps=1, prompts_per_step=4, rollouts=5, max_new_tokens=4, checkpoint_every=1,
                                loss_aggregation=mode)
        trainer = EmbeddedGRPOTrainer(root / "base", noisy, MethodSpec("baseline", "baseline", {}, Family.none), 7,
                                      settings, TEMPLATE)
        first_step[mode] = trainer.train(tmp_path / mode, progress=False).iloc[0]
    eq1, token_mean = first_step["seq-mean-token-mean"], first_step["token-mean"]
    assert eq1["mean_reward"] == token_mean["mean_reward"] and eq1["degenerate_group_fraction"] < 1  # same rollouts
    assert abs(eq1["loss"]) < 1e-6
    assert abs(token_mean["loss"]) > 1e-3
