"""The verl trainer subclass on CPU, without Ray or a GPU: the plugin's registration through verl's own entry-point
loading, the sync-mode fix, each policy kind's write-back against the embedded loss (computed with verl's own loss
functions on the written fields), a mixture's prompt draws against p(d) (chi-square), and the driver state across a
checkpoint. verl's transfer queue is replaced by an in-memory store (a real one starts Ray); verl's worker groups by a
stand-in that accepts the calls the trainer makes of them."""
import importlib
import json
import os
import random
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("verl.trainer.ppo.v1.trainer_base")

from hydra import compose, initialize_config_dir  # noqa: E402
from scipy.stats import chisquare  # noqa: E402
from transfer_queue import KVBatchMeta  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.v1 import trainer_base  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync  # noqa: E402
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.config import omega_conf_to_dataclass  # noqa: E402

from dataflex_rl.training import grpo  # noqa: E402
from dataflex_rl.backends.embedded.model import build_model, save_model, train_tokenizer  # noqa: E402
from dataflex_rl.backends.embedded.settings import ModelShape  # noqa: E402
from dataflex_rl.backends.verl import plugin, registration  # noqa: E402
from dataflex_rl.backends.verl.job import VerlRunJob  # noqa: E402
from dataflex_rl.backends.verl.overrides import RunFiles, run_overrides  # noqa: E402
from dataflex_rl.training.recipe import GRPOSettings  # noqa: E402
from dataflex_rl.backends.verl.checkpoints import TRACKER_FILE  # noqa: E402
from dataflex_rl.backends.verl.trainer import (DEBUG_DUMP_VARIABLE, DRIVER_STATE_FILE,  # noqa: E402
                                               DataflexTrainer)
from dataflex_rl.policies.methods import MethodSpec  # noqa: E402
from dataflex_rl.policies.catalogue import Family  # noqa: E402
from dataflex_rl.backends.verl.writeback import verl_loss_fields  # noqa: E402
from dataflex_rl.policies import GroupBatch, LossWeights  # noqa: E402
from dataflex_rl.policies.weights import reweighting_weights, selection_weights  # noqa: E402
from dataflex_rl.policies.driver import LossInputs, PolicyDriver  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOMAINS = ["math"] * 30 + ["logic"] * 20 + ["science"] * 10  # corpus shares 1/2, 1/3, 1/6
PROMPTS, ROLLOUTS, KL_COEF = 4, 3, 1e-3
VERL_CONFIG = os.path.join(os.path.dirname(trainer_base.__file__), "..", "..", "config")


# --- fixtures: a tiny model directory, the corpus in verl's parquet schema, a composed verl config ------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("model")
    tokenizer = train_tokenizer([f"question {i} answer {i * 7}" for i in range(50)], vocab_size=300)
    shape = ModelShape(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                       num_key_value_heads=1, vocab_size=len(tokenizer))
    save_model(build_model(shape, tokenizer, seed=0), tokenizer, root)
    return root


def _corpus_parquet(path, domains=DOMAINS, start=0, text="question"):
    rows = [{"data_source": f"source_{domain}", "prompt": [{"role": "user", "content": f"{text} {row}"}],
             "ability": domain, "reward_model": {"style": "rule", "ground_truth": str(row)},
             "extra_info": {"row": row, "id": f"id{row}", "domain": domain, "answer_format": "number",
                            "metadata": "{}", "noise_p": None},
             "domain": domain} for row, domain in enumerate(domains, start)]
    pd.DataFrame(rows).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return _corpus_parquet(tmp_path_factory.mktemp("corpus") / "train.parquet")


def _config(tmp_path, model_dir, train_file, method, mode="dataflex_rl", seed=7, train_files=None):
    job = VerlRunJob(method=method, seed=seed, train_file=str(train_file), rollouts=ROLLOUTS).write(
        tmp_path / "job.json")
    overrides = [f"trainer.v1.trainer_mode={mode}", f"actor_rollout_ref.model.path={model_dir}",
                 f"data.train_files={train_files or train_file}", f"data.val_files={train_file}",
                 f"data.train_batch_size={PROMPTS}", f"actor_rollout_ref.rollout.n={ROLLOUTS}",
                 "algorithm.adv_estimator=grpo", "data.dataloader_num_workers=0",
                 "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
                 f"actor_rollout_ref.actor.ppo_mini_batch_size={PROMPTS}",
                 "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1", "actor_rollout_ref.actor.use_kl_loss=True",
                 f"actor_rollout_ref.actor.kl_loss_coef={KL_COEF}", f"trainer.default_local_dir={tmp_path / 'ckpt'}",
                 f"+dataflex_rl.job_file={job}"]
    with initialize_config_dir(config_dir=os.path.abspath(VERL_CONFIG), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


class FakeTransferQueue:
    """verl's transfer queue as a dict: per key, its fields (a response-level tensor, or the prompt's uid)."""

    def __init__(self):
        self.store: dict[str, dict] = {}
        self.tags: dict[str, dict] = {}

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        names = [f for f in select_fields if all(f in self.store[k] for k in keys)]
        fields = {"uid": np.array([self.store[k]["uid"] for k in keys], dtype=object)} if "uid" in names else {}
        for name in (n for n in names if n != "uid"):
            fields[name] = torch.nested.as_nested_tensor([self.store[k][name] for k in keys], layout=torch.jagged)
        return tu.get_tensordict(fields)

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for name in fields.keys():
            for key, value in zip(keys, fields[name].unbind()):
                self.store[key][name] = value
        for key, tag in zip(keys, tags or [None] * len(keys)):
            self.tags[key] = tag or self.tags.get(key, {})
        persisted = sorted(set.intersection(*(set(self.store[key]) for key in keys)))
        return KVBatchMeta(keys=list(keys), tags=[self.tags[key] for key in keys], partition_id=partition_id,
                           fields=persisted)


class StandInWorkers:
    """verl's actor worker group, for the calls the trainer makes of it outside the model itself."""

    def update_actor(self, batch):
        return {"metrics": {"mfu": [0.0]}}

    def save_checkpoint(self, local_path, *args, **kwargs):
        """The actor folder as verl's FSDP checkpoint manager writes it on one GPU (shards and fsdp_config.json)."""
        os.makedirs(local_path, exist_ok=True)
        for name in ("model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt", "fsdp_config.json"):
            open(os.path.join(local_path, name), "wb").close()

    def load_checkpoint(self, *args, **kwargs):
        return None


@pytest.fixture
def fake_tq(monkeypatch):
    fake = FakeTransferQueue()
    monkeypatch.setattr(trainer_base.tq, "kv_batch_get", fake.kv_batch_get)
    monkeypatch.setattr(trainer_base.tq, "kv_batch_put", fake.kv_batch_put)
    return fake


def _trainer(config):
    trainer = DataflexTrainer(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer.actor_rollout_wg = StandInWorkers()
    trainer.global_steps = 0
    return trainer


def _fake_step(trainer, fake, rewards_of_row, seed=0):
    """One step of the trainer's own hooks on fake rollouts: the draw, K responses per prompt (random lengths,
    log-probs and order, as verl's batch balancing leaves them, plus one padding sample), the advantages and the
    update. Returns the step's corpus rows, its [G, K] rewards, [G, K, L] tensors and keys, and the metrics."""
    trainer.global_steps += 1
    batch = trainer._next_train_batch()
    uids, rows = list(batch["uid"]), [info["row"] for info in batch["extra_info"]]
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (len(rows), ROLLOUTS), generator=gen)
    length = int(lengths.max())
    rewards = torch.tensor([rewards_of_row(row) for row in rows], dtype=torch.float32)
    token_mask = (torch.arange(length) < lengths[..., None]).float()
    old = -torch.rand(len(rows), ROLLOUTS, length, generator=gen) * token_mask
    keys = [[f"{uid}_{k}_0" for k in range(ROLLOUTS)] for uid in uids]
    for g, uid in enumerate(uids):
        for k in range(ROLLOUTS):
            n = int(lengths[g, k])
            scores = torch.zeros(n)
            scores[-1] = rewards[g, k]
            fake.store[keys[g][k]] = {"uid": uid, "response_mask": torch.ones(n, dtype=torch.int64),
                                      "rm_scores": scores, "old_log_probs": old[g, k, :n].clone()}
    fake.store["padpad_0_0"] = {"uid": "padpad", "response_mask": torch.ones(1, dtype=torch.int64),
                                "rm_scores": torch.zeros(1), "old_log_probs": torch.zeros(1)}
    order = [key for group in keys for key in group]
    random.Random(seed).shuffle(order)
    tags = [{"global_steps": trainer.global_steps} for _ in order] + [{"is_padding": True}]
    meta = KVBatchMeta(keys=order + ["padpad_0_0"], tags=tags, partition_id="train")
    fake.tags.update(zip(meta.keys, meta.tags))
    metrics = {}
    meta = trainer._compute_advantage(meta, metrics)
    trainer._update_actor(meta, {})
    return rows, rewards, token_mask, old, keys, metrics, meta


def _written(fake, meta, keys, name, length):
    """A field as verl's actor update fetches it (the fields the step's batch lists), regrouped to [G, K, L] (zero
    beyond each response)."""
    assert name in meta.fields
    out = torch.zeros(len(keys), len(keys[0]), length)
    for g, group in enumerate(keys):
        for k, key in enumerate(group):
            value = fake.store[key][name]
            out[g, k, :len(value)] = value.float()
    return out


def _assert_documented(message_part):
    """The trainer's refusals are listed in docs/refusals.md ("The verl trainer at start-up")."""
    with open(os.path.join(REPO, "docs", "refusals.md")) as handle:
        assert message_part in handle.read()


# --- the plugin -------------------------------------------------------------------------------------------------
_REGISTRY_PROBE = """
import json, verl
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
loaded = TRAINER_REGISTRY.get("dataflex_rl")
from dataflex_rl.backends.verl import plugin, registration
try:
    registration.check_registered(plugin.DataflexTrainer)
    error = None
except RuntimeError as e:
    error = str(e)
print(json.dumps({"loaded": None if loaded is None else loaded.__name__, "error": error}))
"""


@pytest.mark.parametrize("policy, loads", [(None, True), ("dataflex_rl,another_plugin", True),
                                           ("none", False), ("another_plugin", False)])
def test_import_verl_loads_the_plugin_unless_verl_is_told_not_to(policy, loads):
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("VERL_USE_EXTERNAL_PLUGINS", None)
    if policy is not None:
        env["VERL_USE_EXTERNAL_PLUGINS"] = policy
    result = subprocess.run([sys.executable, "-c", _REGISTRY_PROBE], env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["loaded"] == ("DataflexTrainer" if loads else None)
    if loads:
        assert probe["error"] is None
    else:  # importing the module by hand registers it here, but verl's processes would not have it
        for text in ("VERL_USE_EXTERNAL_PLUGINS", f"{policy!r}", "[verl.plugins] dataflex_rl = "
                     "dataflex_rl.backends.verl.plugin", "installed"):
            assert text in probe["error"]
        if policy == "none":
            _assert_documented(probe["error"])


def test_reimporting_the_plugin_keeps_one_registration():
    importlib.reload(plugin)
    assert trainer_base.get_trainer_cls(registration.TRAINER_NAME) is DataflexTrainer
    registration.check_registered(DataflexTrainer)


def test_the_trainer_runs_verl_in_sync_mode(tmp_path, model_dir, corpus, caplog):
    baseline = MethodSpec("baseline", "baseline", {}, Family.none)
    with caplog.at_level("INFO", logger=registration.__name__):
        trainer = _trainer(_config(tmp_path, model_dir, corpus, baseline))
    assert f"dataflex_rl plugin registered in {os.getpid()}" in caplog.text
    assert trainer.config.trainer.v1.trainer_mode == "sync"
    assert type(trainer.replay_buffer) is ReplayBuffer
    assert trainer.config.data.get("gen_batch_size") is None and trainer.train_dataloader.batch_size == PROMPTS
    # the same config under the plugin's name, without the fix, is what verl would run
    unfixed = PPOTrainerSync(_config(tmp_path, model_dir, corpus, baseline))
    unfixed._init_tokenizer()
    unfixed._init_dataloader()
    assert type(unfixed.replay_buffer) is ReplayBufferAsync and unfixed.config.data.gen_batch_size == 1


def test_a_job_whose_rollouts_differ_from_verls_is_refused(tmp_path, model_dir, corpus):
    config = _config(tmp_path, model_dir, corpus, MethodSpec("baseline", "baseline", {}, Family.none))
    config.actor_rollout_ref.rollout.n = ROLLOUTS + 1
    with pytest.raises(ValueError, match=r"rollouts 3, but verl's actor_rollout_ref.rollout.n is 4") as refused:
        DataflexTrainer(config)
    _assert_documented(str(refused.value).split(": ", 1)[1])


@pytest.mark.parametrize("key, value", [("rollout_is", "token"), ("rollout_rs", "token_k1")])
def test_verls_rollout_correction_is_refused_beside_the_policy_weights(tmp_path, model_dir, corpus, key, value):
    config = _config(tmp_path, model_dir, corpus, MethodSpec("baseline", "baseline", {}, Family.none))
    config.algorithm.rollout_correction[key] = value
    with pytest.raises(ValueError, match=f"algorithm.rollout_correction.{key}: '{value}', but the data policy writes "
                                         f"rollout_is_weights .* leave algorithm.rollout_correction.{key} null"
                       ) as refused:
        DataflexTrainer(config)
    if key == "rollout_is":
        _assert_documented(str(refused.value))


def test_a_dataset_out_of_corpus_order_is_refused(tmp_path, model_dir):
    shuffled = _corpus_parquet(tmp_path / "train.parquet")
    frame = pd.read_parquet(shuffled).iloc[::-1].reset_index(drop=True)
    frame.to_parquet(shuffled)
    trainer = _trainer(_config(tmp_path, model_dir, shuffled, MethodSpec("baseline", "baseline", {}, Family.none)))
    with pytest.raises(RuntimeError, match="is not row .* of verl's train dataset .* data.filter_overlong_prompts"
                       ) as refused:
        trainer._next_train_batch()
    _assert_documented(str(refused.value).split("): ", 1)[1])


def test_verls_dataset_holds_a_prompt_selections_validation_rows_after_the_corpus_rows(tmp_path, model_dir, corpus):
    """The validation_set policy keeps validation rows (numbered after the corpus's); the train job's data.train_files
    (overrides.train_files) gives verl both files, so each kept row is that row of verl's dataset."""
    files = RunFiles(train_file=corpus, job_file=tmp_path / "job.json", checkpoint_dir=tmp_path / "ckpt")
    _corpus_parquet(files.validation_file, ["math"] * 5, start=len(DOMAINS), text="validation question")
    override = next(o for o in run_overrides("m", GRPOSettings(), 1, gpus=1, cpus=2, files=files, attention="sdpa",
                                             validation=True) if o.startswith("data.train_files="))
    baseline = MethodSpec("baseline", "baseline", {}, Family.none)
    trainer = _trainer(_config(tmp_path, model_dir, corpus, baseline, train_files=override.split("=", 1)[1]))
    assert len(trainer.train_dataset) == len(DOMAINS) + 5
    for row in (0, len(DOMAINS) - 1, len(DOMAINS), len(DOMAINS) + 4):
        assert trainer._dataset_row(row)["extra_info"]["row"] == row
    row = len(DOMAINS) + 2
    assert trainer._dataset_row(row)["raw_prompt"][0]["content"] == f"validation question {row}"
    corpus_only = _trainer(_config(tmp_path, model_dir, corpus, baseline))
    with pytest.raises(RuntimeError, match=f"corpus row {len(DOMAINS)} is not row"):
        corpus_only._dataset_row(len(DOMAINS))


# --- the write-back maths, by hand ------------------------------------------------------------------------------
TOKENS = torch.tensor([[[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]])  # one group of two responses, of 2 and 3 tokens


def _loss_inputs(weights):
    batch = GroupBatch(rewards=torch.zeros(1, 2), lengths=TOKENS.sum(-1), token_mask=TOKENS,
                       advantages=torch.ones_like(TOKENS), old_logprobs=torch.zeros_like(TOKENS), domains=["math"],
                       prompt_ids=["a"])
    used = weights.advantages if weights.advantages is not None else batch.advantages
    return LossInputs(advantages=used, pg=weights.pg, kl=weights.kl, batch=batch, weights=weights)


KEEP_FIRST = torch.tensor([[1.0, 0.0]])
DROPPED = torch.tensor([[[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]])
WRITE_BACK_CASES = [  # the policy's weights; the written response_mask, rollout_is_weights and advantages
    ("paper selection", selection_weights(KEEP_FIRST, TOKENS), DROPPED, DROPPED, None),
    ("released selection", selection_weights(KEEP_FIRST, TOKENS, drop_kl=False), TOKENS, DROPPED, None),
    ("token reweighting", reweighting_weights(torch.tensor([[[0.5, 2.0, 9.0], [1.0, 0.0, 3.0]]]), TOKENS, "none"),
     TOKENS, torch.tensor([[[0.5, 2.0, 0.0], [1.0, 0.0, 3.0]]]), None),
    ("recomputing selection", selection_weights(KEEP_FIRST, TOKENS, advantages=torch.tensor([[2.0, -1.0]])),
     DROPPED, DROPPED, torch.tensor([[[2.0, 2.0, 0.0], [0.0, 0.0, 0.0]]])),
]


@pytest.mark.parametrize("weights, mask, is_weights, advantages", [case[1:] for case in WRITE_BACK_CASES],
                         ids=[case[0] for case in WRITE_BACK_CASES])
def test_the_write_back_by_hand(weights, mask, is_weights, advantages):
    written = verl_loss_fields(_loss_inputs(weights))
    assert torch.equal(written.response_mask, mask) and torch.equal(written.rollout_is_weights, is_weights)
    assert written.advantages is None if advantages is None else torch.equal(written.advantages, advantages)


@pytest.mark.parametrize("pg, kl, message", [
    (TOKENS, TOKENS * 0.5, "a KL weight other than 0 or 1 on a response token"),
    (TOKENS, DROPPED, "a PG weight on a token whose KL weight is 0"),
], ids=["weighted KL", "PG without KL"])
def test_weights_verl_cannot_express_are_refused(pg, kl, message):
    with pytest.raises(ValueError, match=message):
        verl_loss_fields(_loss_inputs(LossWeights(pg=pg, kl=kl, kept_fraction=1.0)))


# --- the write-back, per policy kind ------------------------------------------------------------------------------
# rewards of a prompt by its domain: math q = 1/3 and logic q = 2/3 (kept by difffilter), science all 0 (dropped)
def _rewards_by_domain(row):
    return {"math": [1.0, 0.0, 0.0], "logic": [1.0, 1.0, 0.0], "science": [0.0, 0.0, 0.0]}[DOMAINS[row]]


POLICY_KINDS = [
    # method, whether Eq. 1 drops KL of some response (the written response_mask changes the KL term)
    (MethodSpec("difffilter", "difffilter", {"low": 0.5, "high": 0.9}, Family.selection), True),
    (MethodSpec("difffilter_released", "difffilter", {"low": 0.5, "high": 0.9, "semantics": "dataflex_released"},
                Family.selection), False),
    (MethodSpec("per", "per", {}, Family.reweighting), False),
    (MethodSpec("ar", "ar", {}, Family.reweighting), False),
    (MethodSpec("gfpo", "gfpo", {"keep": 2}, Family.selection), True),
    (MethodSpec("baseline", "baseline", {}, Family.none), False),
]


@pytest.mark.parametrize("method, drops_kl", POLICY_KINDS, ids=[m.name for m, _ in POLICY_KINDS])
def test_the_written_fields_give_the_embedded_loss_under_verls_loss(tmp_path, model_dir, corpus, fake_tq, method,
                                                                    drops_kl):
    config = _config(tmp_path, model_dir, corpus, method)
    trainer = _trainer(config)
    rows, rewards, token_mask, old, keys, metrics, meta = _fake_step(trainer, fake_tq, _rewards_by_domain)
    length = token_mask.shape[-1]

    # the embedded path on the same numbers: the same draw, GRPO advantages, the same driver
    embedded = PolicyDriver(method, DOMAINS, seed=7)
    assert embedded.draw(PROMPTS) == rows
    advantages = grpo.group_advantages(rewards)[..., None] * token_mask
    loss = embedded.weigh(rewards, token_mask, advantages, old, [DOMAINS[r] for r in rows], [f"id{r}" for r in rows])

    mask = _written(fake_tq, meta, keys, "response_mask", length)
    weights = _written(fake_tq, meta, keys, "rollout_is_weights", length)
    written_advantages = _written(fake_tq, meta, keys, "advantages", length)
    torch.testing.assert_close(written_advantages * mask, loss.advantages * mask, atol=1e-5, rtol=0)
    padding = fake_tq.store["padpad_0_0"]  # verl's padding sample keeps its mask and gets no weight
    assert torch.equal(padding["response_mask"], torch.ones(1, dtype=torch.int64))
    assert torch.equal(padding["rollout_is_weights"], torch.zeros(1))
    assert metrics["dataflex/kept_fraction"] == pytest.approx(loss.weights.kept_fraction)
    assert metrics["dataflex/mean_reward"] == pytest.approx(float(rewards.mean()))

    # verl's loss on the written fields equals the embedded Eq. 1 loss
    gen = torch.Generator().manual_seed(1)
    logp = (old + 0.05 * torch.randn(old.shape, generator=gen)) * token_mask
    ref = (old + 0.3 * torch.randn(old.shape, generator=gen)) * token_mask
    expected, _ = grpo.grpo_loss(logp, old, ref, loss.advantages, token_mask, loss.pg, loss.kl, kl_coef=KL_COEF)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    batch_info = {"dp_size": 1, "batch_num_tokens": None, "global_batch_size": PROMPTS * ROLLOUTS,
                  "loss_scale_factor": None}
    actor.global_batch_info.update(batch_info)
    flat = [t.reshape(PROMPTS * ROLLOUTS, length) for t in (old, logp, written_advantages, mask, weights, ref)]
    old_f, logp_f, adv_f, mask_f, weights_f, ref_f = flat
    pg, _ = core_algos.compute_policy_loss_vanilla(old_f, logp_f, adv_f, mask_f.bool(), "seq-mean-token-mean", actor,
                                                   rollout_is_weights=weights_f)

    def kl_term(response_mask):
        return core_algos.agg_loss(core_algos.kl_penalty(logp_f, ref_f, "low_var_kl"), response_mask,
                                   "seq-mean-token-mean", **batch_info)

    torch.testing.assert_close(pg + KL_COEF * kl_term(mask_f), expected, atol=1e-6, rtol=1e-6)
    # Eq. 1 drops a response's KL with its PG; the released selection and a reweighting keep every KL term
    unchanged = token_mask.reshape(PROMPTS * ROLLOUTS, length)
    assert bool(torch.isclose(kl_term(mask_f), kl_term(unchanged), rtol=1e-6, atol=0)) is not drops_kl


def test_the_paper_and_released_selections_write_the_mask_and_the_weights_by_hand(tmp_path, model_dir, corpus,
                                                                                   fake_tq):
    """difffilter keeps 0.5 < q < 0.9: logic prompts (q = 2/3) only. Paper: the other responses leave the mask;
    released: the mask stays whole and their PG weight is 0."""
    for semantics, mask_of, weight_of in (("paper", {"logic"}, {"logic"}),
                                          ("dataflex_released", {"math", "logic", "science"}, {"logic"})):
        method = MethodSpec("difffilter", "difffilter", {"low": 0.5, "high": 0.9, "semantics": semantics},
                            Family.selection)
        trainer = _trainer(_config(tmp_path, model_dir, corpus, method))
        rows, _, token_mask, _, keys, _, meta = _fake_step(trainer, fake_tq, _rewards_by_domain, seed=3)
        kept = lambda domains: torch.tensor([DOMAINS[r] in domains for r in rows]).float()[:, None, None]  # noqa
        length = token_mask.shape[-1]
        assert torch.equal(_written(fake_tq, meta, keys, "response_mask", length), token_mask * kept(mask_of))
        assert torch.equal(_written(fake_tq, meta, keys, "rollout_is_weights", length),
                           token_mask * kept(weight_of) * kept(mask_of))


# --- a mixture draws before generation -------------------------------------------------------------------------
@pytest.mark.parametrize("weights", [{"math": 0.2, "logic": 0.7, "science": 0.1},
                                     {"math": 0.1, "logic": 0.1, "science": 0.8}])
def test_a_mixture_draws_domains_in_proportion_to_its_probabilities(tmp_path, model_dir, corpus, weights):
    method = MethodSpec("static", "static", {"weights": weights}, Family.mixture)
    trainer = _trainer(_config(tmp_path, model_dir, corpus, method))
    batches = [trainer._next_train_batch() for _ in range(100)]
    rows = [info["row"] for batch in batches for info in batch["extra_info"]]
    assert rows == PolicyDriver(method, DOMAINS, seed=7).draw(len(rows))  # the embedded backend's prompt order
    assert list(batches[0]["raw_prompt"]) == [trainer.train_dataset[r]["raw_prompt"] for r in rows[:PROMPTS]]
    names = sorted(weights)
    counts = [sum(DOMAINS[r] == d for r in rows) for d in names]
    assert chisquare(counts, [weights[d] * len(rows) for d in names]).pvalue > 1e-3
    shares = {"math": 0.5, "logic": 1 / 3, "science": 1 / 6}
    assert chisquare(counts, [shares[d] * len(rows) for d in names]).pvalue < 1e-3  # not the corpus's shares


def test_the_driver_state_survives_a_checkpoint(tmp_path, model_dir, corpus, fake_tq):
    """An adaptive mixture's p(d) and the prompt stream, resumed from verl's checkpoint of step 2, continue exactly
    as the uninterrupted run does."""
    method = MethodSpec("dump_ucb", "dump_ucb", {}, Family.mixture)
    config = _config(tmp_path, model_dir, corpus, method)
    uninterrupted = _trainer(config)
    for step in range(2):
        _fake_step(uninterrupted, fake_tq, _rewards_by_domain, seed=step)
    uninterrupted._save_checkpoint()
    ahead = [_fake_step(uninterrupted, fake_tq, _rewards_by_domain, seed=step)[0] for step in range(2, 6)]

    resumed = _trainer(_config(tmp_path, model_dir, corpus, method))
    resumed._load_checkpoint()
    assert resumed.global_steps == 2
    assert [_fake_step(resumed, fake_tq, _rewards_by_domain, seed=step)[0] for step in range(2, 6)] == ahead
    fresh = _trainer(_config(tmp_path, model_dir, corpus, method))  # without the state: another prompt stream
    assert [_fake_step(fresh, fake_tq, _rewards_by_domain, seed=step)[0] for step in range(2, 6)] != ahead

    (tmp_path / "ckpt" / "global_step_2" / DRIVER_STATE_FILE).unlink()
    unresumable = _trainer(_config(tmp_path, model_dir, corpus, method))
    with pytest.raises(RuntimeError, match="dataflex_rl_driver.pt: missing, so resuming .* would restart"
                       ) as refused:
        unresumable._load_checkpoint()
    _assert_documented(str(refused.value).split(" would ", 1)[1].split(" — ")[0])


def test_a_driver_state_that_would_run_code_is_refused_and_left_in_place(tmp_path, model_dir, corpus, fake_tq):
    """The driver state in verl's checkpoint is read without code execution: one replaced by an object that calls
    `Path.touch` when unpickled is refused at resume before it runs, naming the file and the checkpoint folder to
    delete; the checkpoint stays whole (docs/refusals.md, "Train states from elsewhere")."""
    from dataflex_rl.artefacts.train_state import UntrustedStateError
    from pickle_payload import write_payload

    method = MethodSpec("dump_ucb", "dump_ucb", {}, Family.mixture)
    first = _trainer(_config(tmp_path, model_dir, corpus, method))
    _fake_step(first, fake_tq, _rewards_by_domain, seed=0)
    first._save_checkpoint()
    folder, marker = tmp_path / "ckpt" / "global_step_1", tmp_path / "ran"
    saved = sorted(p.name for p in folder.rglob("*"))
    write_payload(folder / DRIVER_STATE_FILE, marker, stream={}, mixture=None)
    with pytest.raises(UntrustedStateError, match=f"{DRIVER_STATE_FILE}: refused to load this train state") as refused:
        _trainer(_config(tmp_path, model_dir, corpus, method))._load_checkpoint()
    assert f"delete {tmp_path / 'ckpt'}." in str(refused.value)
    assert not marker.exists() and sorted(p.name for p in folder.rglob("*")) == saved
    _assert_documented("refused to load this train state: it holds objects beyond tensors and numbers")


def test_a_resumed_run_removes_the_checkpoint_it_resumed_from_once_it_saves(tmp_path, model_dir, corpus, fake_tq):
    """verl's max_actor_ckpt_to_keep=1 forgets what an earlier process saved; the trainer's save removes it: the
    first process saves steps 1 and 2 (its own save removes step 1), a requeued one resumes from step 2 and saves
    step 3, after which only step 3 is left, whole, and verl's tracker names it."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    method = MethodSpec("dump_ucb", "dump_ucb", {}, Family.mixture)
    checkpoints = tmp_path / "ckpt"
    first = _trainer(_config(tmp_path, model_dir, corpus, method))
    for step in range(2):
        _fake_step(first, fake_tq, _rewards_by_domain, seed=step)
        first._save_checkpoint()
    assert sorted(p.name for p in checkpoints.iterdir()) == ["global_step_2", TRACKER_FILE]

    resumed = _trainer(_config(tmp_path, model_dir, corpus, method))
    resumed._load_checkpoint()
    assert resumed.global_steps == 2
    _fake_step(resumed, fake_tq, _rewards_by_domain, seed=2)
    resumed._save_checkpoint()
    assert sorted(p.name for p in checkpoints.iterdir()) == ["global_step_3", TRACKER_FILE]
    assert (checkpoints / TRACKER_FILE).read_text() == "3"
    assert sorted(p.name for p in (checkpoints / "global_step_3").rglob("*")) == sorted([
        "actor", DRIVER_STATE_FILE, "data.pt", "fsdp_config.json", "model_world_size_1_rank_0.pt",
        "optim_world_size_1_rank_0.pt"])
    assert find_latest_ckpt_path(str(checkpoints)) == str(checkpoints / "global_step_3")


def test_the_debug_dump_holds_the_loss_fields_the_actor_update_fetches(tmp_path, model_dir, corpus, fake_tq,
                                                                       monkeypatch):
    """difffilter keeps logic prompts only (q = 2/3 in (0.5, 0.9)): the dump lists rollout_is_weights among the
    update's fields and holds the zeroed response_mask of every other response, as the store the worker reads has
    them; verl's padding sample is tagged. Without the variable nothing is written."""
    method = MethodSpec("difffilter", "difffilter", {"low": 0.5, "high": 0.9}, Family.selection)
    quiet = _trainer(_config(tmp_path, model_dir, corpus, method))
    _fake_step(quiet, fake_tq, _rewards_by_domain, seed=4)
    assert not (tmp_path / "dump").exists()

    monkeypatch.setenv(DEBUG_DUMP_VARIABLE, str(tmp_path / "dump"))
    trainer = _trainer(_config(tmp_path, model_dir, corpus, method))
    rows, _, token_mask, _, keys, _, meta = _fake_step(trainer, fake_tq, _rewards_by_domain, seed=4)
    dump = torch.load(tmp_path / "dump" / "update_actor_step1.pt")
    assert dump["step"] == 1 and dump["keys"] == meta.keys and dump["fields"] == meta.fields
    assert {"response_mask", "rollout_is_weights", "advantages"} <= set(dump["fields"])
    assert dump["padding"] == [False] * (PROMPTS * ROLLOUTS) + [True]
    position = {key: i for i, key in enumerate(dump["keys"])}
    for g, row in enumerate(rows):
        for k, key in enumerate(keys[g]):
            mask, weights = dump["response_mask"][position[key]], dump["rollout_is_weights"][position[key]]
            length = int(token_mask[g, k].sum())
            kept = DOMAINS[row] == "logic"
            assert torch.equal(mask, torch.full((length,), int(kept)))
            assert torch.equal(weights, fake_tq.store[key]["rollout_is_weights"]) and bool(weights.any()) is kept
