"""A prompt selection on the verl backend, on CPU: the merge-then-score loop's first round (selection_rounds.py) on a
tiny Hugging Face model with real rollouts (transformers' sampling: vLLM needs a GPU) and the training reward, then
verl's trainer subclass drawing the round's kept rows through the fakes of tests/test_verl_trainer.py. The kept set
equals the one the embedded path's selector keeps on the same rollouts and gradients (its [N, P] rows, where the verl
probe streams the score one group at a time); the round's metrics land on the round's first step."""
import json

import pandas as pd
import pytest
import torch

pytest.importorskip("verl.trainer.ppo.v1.trainer_base")

from tokenizers import Tokenizer  # noqa: E402
from tokenizers.models import WordLevel  # noqa: E402
from tokenizers.pre_tokenizers import Whitespace  # noqa: E402
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from test_verl_trainer import ROLLOUTS, _config, _fake_step, _trainer, fake_tq  # noqa: E402,F401
from dataflex_rl.backends.verl.job import VerlRunJob  # noqa: E402
from dataflex_rl.backends.verl.launch import LoggedStep, VERL_METRICS, metrics_frame  # noqa: E402
from dataflex_rl.backends.verl.probe import RoundBoundary, VerlProbe  # noqa: E402
from dataflex_rl.backends.verl.selection_rounds import (ROUNDS_FOLDER, policy_driver, read_round,  # noqa: E402
                                                        round_file, run_round, run_rows, run_segments, write_round)
from dataflex_rl.backends.verl.trainer import DataflexTrainer  # noqa: E402
from dataflex_rl.policies.methods import MethodSpec  # noqa: E402
from dataflex_rl.policies.catalogue import Family  # noqa: E402
from dataflex_rl.prompt_selection.candidates import training_rows, validation_rows  # noqa: E402
from dataflex_rl.training.recipe import GRPOSettings  # noqa: E402

WORDS = ["a", "b", "c"]
ROWS = 40
OPTIONS = {"candidates_per_round": 12, "selection_ratio": 3, "steps_per_round": 2, "rollouts_candidate": 4,
           "rollouts_validation": 6, "validation_size": 4}
PROMPTS = 4  # the verl config's train_batch_size (tests/test_verl_trainer.py)


@pytest.fixture(scope="module")
def word_model(tmp_path_factory):
    """A tiny Qwen2 over the words a, b, c with a chat template (the probe renders prompts through it)."""
    root = tmp_path_factory.mktemp("word_model")
    vocabulary = {"<pad>": 0, "<eos>": 1, "a": 2, "b": 3, "c": 4, "question": 5}
    backend = Tokenizer(WordLevel(vocabulary, unk_token="<pad>"))
    backend.pre_tokenizer = Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>")
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    tokenizer.save_pretrained(root)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(vocabulary), hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=1, pad_token_id=0)
    Qwen2ForCausalLM(config).save_pretrained(root)
    return root


def _corpus(path):
    """Prompts of words; the answer 'a' (exact), which a sampled one-word response hits about a third of the time;
    every fourth row reward-noised (p 0.5), so the round metrics count corrupted candidates."""
    rows = [{"data_source": "words", "prompt": [{"role": "user", "content": f"question {WORDS[r % 3]} {WORDS[r // 3 % 3]}"}],
             "ability": "words", "reward_model": {"style": "rule", "ground_truth": "a"},
             "extra_info": {"row": r, "id": f"id{r}", "domain": "words", "question": "q", "answer_format": "exact",
                            "metadata": "{}", "noise_p": 0.5 if r % 4 == 3 else None},
             "domain": "words"} for r in range(ROWS)]
    pd.DataFrame(rows).to_parquet(path)
    return path


class GenerateSampler:
    """The probe's sampler on the CPU: transformers' sampling (no top-k or nucleus cut, as the training rollout),
    each response up to the first EOS (kept, as vLLM keeps it)."""

    def __init__(self, model, max_new_tokens):
        self.model, self.max_new_tokens, self.released = model, max_new_tokens, 0

    def sample(self, prompts, *, samples, temperature, seed):
        torch.manual_seed(seed)
        out = []
        for prompt in prompts:
            ids = torch.tensor([list(prompt)])
            generated = self.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=0,
                                            top_p=1.0, temperature=temperature, max_new_tokens=self.max_new_tokens,
                                            num_return_sequences=samples, pad_token_id=0, eos_token_id=1)
            responses = []
            for row in generated[:, ids.shape[1]:].tolist():
                responses.append(row[:row.index(1) + 1] if 1 in row else row)
            out.append(responses)
        return out

    def release(self):
        self.released += 1


def _boundary(weights, train_file, seed):
    model = AutoModelForCausalLM.from_pretrained(weights).float()
    from transformers import AutoTokenizer

    return RoundBoundary(model, AutoTokenizer.from_pretrained(weights), GenerateSampler(model, 2),
                         pd.read_parquet(train_file).to_dict("records"), seed, micro_batch=3)


class Replayed:
    """A verl probe's recorded rollouts with the [N, P] gradients of the embedded path's probe contract (no streamed
    score)."""

    def __init__(self, probe, streams):
        self.probe, self.streams = probe, streams

    def rollouts(self, rows, samples, stream, noisy):
        return self.streams[stream]

    def group_gradients(self, rollouts, aggregation):
        return self.probe.group_gradients(rollouts, aggregation)

    def summed_gradient(self, rollouts, aggregation):
        return self.probe.summed_gradient(rollouts, aggregation)

    def module_slices(self):
        return self.probe.module_slices()

    def adam_second_moment(self):
        return None


@pytest.mark.parametrize("policy", ["gradalign", "accgreedy"])
def test_the_first_round_runs_and_the_trainer_draws_its_kept_rows(tmp_path, word_model, fake_tq, policy,
                                                                   monkeypatch):
    train_file = _corpus(tmp_path / "train.parquet")
    method = MethodSpec(policy, policy, OPTIONS, Family.prompt_selection)
    config = _config(tmp_path, word_model, train_file, method)
    job = VerlRunJob(method, 7, str(train_file), ROLLOUTS, None, str(tmp_path / "state" / ROUNDS_FOLDER))
    job.write(config.dataflex_rl.job_file)
    training = GRPOSettings(steps=OPTIONS["steps_per_round"], prompts_per_step=PROMPTS, rollouts=ROLLOUTS,
                            max_new_tokens=2, temperature=1.0)
    probes, streams, drawn = [], {}, []
    rollouts = VerlProbe.rollouts

    def recording(probe, rows, samples, stream, noisy):  # the round runner opens its own probe: keep what it drew
        probes.append(probe)
        streams[stream] = rollouts(probe, rows, samples, stream, noisy)
        return streams[stream]

    def score_round(weights, index, out):
        write_round(out, run_round(job, training, index, _boundary(weights, train_file, job.seed)))

    def train_to(settings):
        trainer = _trainer(config)
        for _ in range(settings.steps):
            drawn.append(_fake_step(trainer, fake_tq, lambda row: [1.0, 0.0, 0.0])[0])

    monkeypatch.setattr(VerlProbe, "rollouts", recording)
    run_segments(job=job, training=training, model_path=str(word_model), checkpoint_dir=tmp_path / "ckpt",
                 state_dir=tmp_path / "state", score_round=score_round, train_to=train_to,
                 actor_dir=lambda folder, step: folder / f"global_step_{step}" / "actor")
    saved = read_round(round_file(tmp_path / "state" / ROUNDS_FOLDER, 0))
    kept = saved["selection"]["round"]["kept"]
    assert len(kept) == OPTIONS["candidates_per_round"] // OPTIONS["selection_ratio"]
    # the trainer trains on the round's kept rows in the walk the embedded trainer takes
    assert drawn == [training_rows(kept, job.seed, 0, step * PROMPTS, PROMPTS) for step in range(2)]
    metrics = saved["metrics"]
    assert (metrics["round"], metrics["round_candidates"], metrics["round_kept"]) == (0, 12, 4)
    assert metrics["round_training_rollouts"] == ROLLOUTS and metrics["round_seconds_candidate_rollouts"] > 0
    rates = json.loads(metrics["round_pass_rate_histogram"])
    assert sum(rates) == 12 and 0 < metrics["round_chunk_pass_rate"] < 1
    # the embedded path's selector on the same rollouts and gradients keeps the same rows
    embedded = policy_driver(job)
    embedded.draw(PROMPTS, 0, Replayed(probes[0], streams))
    assert embedded.selector.state_dict()["round"]["kept"] == kept
    if policy == "gradalign":
        assert metrics["round_seconds_candidate_backward"] > 0 and metrics["round_seconds_validation"] > 0
        assert json.loads(metrics["round_top_modules"])


def test_a_validation_file_gives_the_rounds_validation_prompts_after_the_corpus_rows(tmp_path, word_model,
                                                                                      monkeypatch):
    """A prompt selection's own validation rows (the train job writes them in verl's schema, numbered after the
    corpus's: launch.train_verl_run) are what the round rolls out as its validation prompts; nothing of the corpus is
    held out, and the kept rows are corpus rows."""
    train_file = _corpus(tmp_path / "train.parquet")
    clean = pd.read_parquet(train_file).head(6)
    clean.assign(extra_info=[{**info, "row": ROWS + i, "noise_p": None} for i, info in enumerate(clean["extra_info"])]
                 ).to_parquet(tmp_path / "validation.parquet")
    method = MethodSpec("gradalign", "gradalign",
                        {**OPTIONS, "validation": {"path": "val.jsonl"}, "validation_size": 5}, Family.prompt_selection)
    job = VerlRunJob(method, 7, str(train_file), ROLLOUTS, None, str(tmp_path / "rounds"), (),
                     str(tmp_path / "validation.parquet"))
    driver = policy_driver(job)
    assert list(driver.selector.pool) == list(range(ROWS))
    assert sorted(driver.selector.validation) == sorted(validation_rows(range(ROWS, ROWS + 6), 5, 0))
    rolled = {}
    rollouts = VerlProbe.rollouts

    def recording(probe, rows, samples, stream, noisy):
        rolled[stream.split(":")[0]] = list(rows)
        return rollouts(probe, rows, samples, stream, noisy)

    monkeypatch.setattr(VerlProbe, "rollouts", recording)
    model = AutoModelForCausalLM.from_pretrained(word_model).float()
    from transformers import AutoTokenizer

    boundary = RoundBoundary(model, AutoTokenizer.from_pretrained(word_model), GenerateSampler(model, 2),
                             run_rows(job)[0].to_dict("records"), job.seed, micro_batch=3)
    training = GRPOSettings(steps=2, prompts_per_step=PROMPTS, rollouts=ROLLOUTS, max_new_tokens=2)
    result = run_round(job, training, 0, boundary)
    assert sorted(rolled["validation"]) == sorted(driver.selector.validation)
    assert all(row < ROWS for row in result["selection"]["round"]["kept"] + rolled["candidates"])
    assert result["metrics"]["round_validation_size"] == 5
    assert 0 <= result["metrics"]["round_validation_pass_rate"] <= 1


def test_the_round_metrics_go_on_the_rounds_first_step_with_its_selection_seconds():
    data = {theirs: 1.0 for theirs in VERL_METRICS.values()}
    steps = {step: LoggedStep({**data, "dataflex/mean_reward": 0.5}, None) for step in (1, 2, 3)}
    round_ = {"round": 1, "round_kept": 4, "round_seconds_candidate_rollouts": 2.0,
              "round_seconds_candidate_backward": 3.0, "round_seconds_validation": 0.5}
    frame = metrics_frame(steps, 3, "gradalign", 0, "sdpa", {2: round_})
    assert frame["seconds"].tolist() == [1.0, 1.0, 6.5]
    assert frame["round"].tolist()[:2] == [None, None] or frame["round"].isna().tolist()[:2] == [True, True]
    assert frame.loc[2, "round"] == 1 and frame.loc[2, "round_kept"] == 4


def test_a_segment_without_its_round_file_is_refused(tmp_path, word_model, fake_tq):
    train_file = _corpus(tmp_path / "train.parquet")
    method = MethodSpec("gradalign", "gradalign", OPTIONS, Family.prompt_selection)
    config = _config(tmp_path, word_model, train_file, method)
    VerlRunJob(method, 7, str(train_file), ROLLOUTS, None, str(tmp_path / "rounds")).write(config.dataflex_rl.job_file)
    trainer = DataflexTrainer(config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer.global_steps = 3  # step 2: round 1
    with pytest.raises(RuntimeError, match=r"round_1.pt: missing, so step 2 has no selection round to draw from"):
        trainer._next_train_batch()


def test_a_prompt_selection_job_without_rounds_is_refused(tmp_path, word_model):
    train_file = _corpus(tmp_path / "train.parquet")
    method = MethodSpec("gradalign", "gradalign", OPTIONS, Family.prompt_selection)
    with pytest.raises(ValueError, match="is a prompt selection, and the job names no rounds_dir"):
        DataflexTrainer(_config(tmp_path, word_model, train_file, method))


def test_the_segments_score_each_round_on_the_last_checkpoint_and_a_requeue_skips_what_is_done(tmp_path, monkeypatch):
    """25 steps in rounds of I = 10: segments 0-10, 10-20, 20-25. verl's runs are stood in for by writing its tracker
    and checkpoint folder, the merger by a record of what it was asked."""
    from dataflex_rl.backends.verl import merge
    from dataflex_rl.backends.verl.checkpoints import TRACKER_FILE
    from dataflex_rl.backends.verl.selection_rounds import segments

    assert [(s.index, s.start, s.end) for s in segments(25, 10)] == [(0, 0, 10), (1, 10, 20), (2, 20, 25)]
    train_file = _corpus(tmp_path / "train.parquet")
    job = VerlRunJob(MethodSpec("gradalign", "gradalign", {**OPTIONS, "steps_per_round": 10}, Family.prompt_selection),
                     7, str(train_file), ROLLOUTS, None, str(tmp_path / "state" / ROUNDS_FOLDER))
    checkpoints, calls = tmp_path / "ckpt", []
    monkeypatch.setattr(merge, "merge_checkpoint", lambda source, target: calls.append(("merge", str(source))))

    def score_round(weights, index, out):
        calls.append(("round", index, weights))
        write_round(out, {"selection": {"round": None}, "metrics": {}})

    def train_to(settings):
        calls.append(("verl", settings.steps))
        (checkpoints / f"global_step_{settings.steps}" / "actor").mkdir(parents=True, exist_ok=True)
        (checkpoints / TRACKER_FILE).write_text(str(settings.steps))

    def run():
        run_segments(job=job, training=GRPOSettings(steps=25), model_path="Qwen/base", checkpoint_dir=checkpoints,
                     state_dir=tmp_path / "state", score_round=score_round, train_to=train_to,
                     actor_dir=lambda folder, step: folder / f"global_step_{step}" / "actor")

    run()
    merged = str(tmp_path / "state" / "round_weights")
    assert calls == [("round", 0, "Qwen/base"), ("verl", 10),
                     ("merge", str(checkpoints / "global_step_10" / "actor")), ("round", 1, merged), ("verl", 20),
                     ("merge", str(checkpoints / "global_step_20" / "actor")), ("round", 2, merged), ("verl", 25)]
    # a requeue after the run finished starts nothing; one killed in segment 2 resumes it without rescoring
    calls.clear()
    run()
    assert calls == []
    (checkpoints / TRACKER_FILE).write_text("20")
    run()
    assert calls == [("verl", 25)]


def test_a_verl_baseline_holds_out_the_studys_validation_rows_and_the_job_file_keeps_them(tmp_path):
    """The study's validation draws travel in the verl run job (through its JSON file) to the driver, which leaves
    their rows out of a baseline's prompts: the rows `validation_rows` draws from the eligible ones (the corpus's
    rows that are not reward-noised), as on the embedded backend."""
    train_file = _corpus(tmp_path / "train.parquet")
    baseline = MethodSpec("baseline", "baseline", {}, Family.none)
    written = VerlRunJob(baseline, 7, str(train_file), ROLLOUTS, None, None, ((6, 0), (3, 1)))
    job = VerlRunJob.read(written.write(tmp_path / "job.json"))
    assert job == written
    clean = [row for row in range(ROWS) if row % 4 != 3]
    held_out = set(validation_rows(clean, 6, 0)) | set(validation_rows(clean, 3, 1))
    assert 6 <= len(held_out) <= 9 and not held_out & {row for row in range(ROWS) if row % 4 == 3}
    one_pass = policy_driver(job).stream.draw(ROWS - len(held_out))  # one pass of the prompt order
    assert sorted(one_pass) == sorted(set(range(ROWS)) - held_out)


class Exploding:
    """A sampler that must not be asked: the round's streams are all saved."""

    def sample(self, prompts, **kwargs):
        raise AssertionError(f"sampled {len(prompts)} prompts again, though their rollouts were saved")

    def release(self):
        pass


def test_a_resumed_round_reuses_the_rollouts_it_saved(tmp_path, word_model):
    """Each stream is saved as it finishes (round_rollouts): a round killed after its rollouts, run again, draws
    nothing and keeps the same rows with the same rollout metrics; a saved stream of other rows is drawn again."""
    train_file = _corpus(tmp_path / "train.parquet")
    job = VerlRunJob(MethodSpec("gradalign", "gradalign", OPTIONS, Family.prompt_selection), 7, str(train_file),
                     ROLLOUTS, None, str(tmp_path / "rounds"))
    training = GRPOSettings(steps=2, prompts_per_step=PROMPTS, rollouts=ROLLOUTS, max_new_tokens=2)
    saved = tmp_path / "round_0.rollouts"
    first = _boundary(word_model, train_file, job.seed)
    first.rollouts_dir = saved
    result = run_round(job, training, 0, first)
    assert sorted(p.name for p in saved.iterdir()) == ["candidates_0.parquet", "validation_0.parquet"]
    again = _boundary(word_model, train_file, job.seed)
    again.rollouts_dir, again.sampler = saved, Exploding()
    resumed = run_round(job, training, 0, again)

    def untimed(metrics):  # as JSON: NaN equals NaN there
        return json.dumps({key: value for key, value in metrics.items() if "seconds" not in key}, sort_keys=True)

    assert resumed["selection"]["round"]["kept"] == result["selection"]["round"]["kept"]
    assert untimed(resumed["selection"]["round"]["pending"]) == untimed(result["selection"]["round"]["pending"])
    assert untimed(resumed["metrics"]) == untimed(result["metrics"])
    other = VerlProbe(_boundary(word_model, train_file, job.seed), 1.0)
    other.boundary.rollouts_dir = saved
    drawn = other.rollouts([0, 1], 4, "candidates:0", noisy=True)  # round 0's file holds other rows
    assert drawn.rewards.shape == (2, 4)


def test_the_rewards_scored_in_worker_processes_are_the_serial_ones(tmp_path, word_model, monkeypatch):
    from dataflex_rl.backends.verl import reward

    boundary = _boundary(word_model, _corpus(tmp_path / "train.parquet"), 7)
    rows = list(range(ROWS))
    responses = [[[2], [3], [2, 4], [4]] for _ in rows]  # "a", "b", "a c", "c"
    serial = boundary.rewards(rows, responses, noisy=True)
    monkeypatch.setattr(reward, "POOL_MIN_RESPONSES", 1)
    boundary.reward_workers = 2
    assert torch.equal(boundary.rewards(rows, responses, noisy=True), serial)
    clean = boundary.rewards(rows, responses, noisy=False)
    assert clean[:, 0].eq(1).all() and clean[:, 1].eq(0).all()  # the verifier's reward: "a" is right
    assert not torch.equal(serial, clean)  # the noisy rows' coin flips
