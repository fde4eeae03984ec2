"""The verl backend's data side, without a GPU: the corpus in verl's parquet schema, the reward function verl calls,
and a train job up to the `main_ppo` subprocess (its files, its refusal on failure, verl's metrics turned into ours,
the final checkpoint handed on)."""
import importlib.util
import json
import re
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from dataflex_rl.backends.base import TrainJob
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.embedded.rewards import rollout_rewards
from dataflex_rl.backends.verl.dataset import write_verl_corpus
from dataflex_rl.backends.verl.checkpoints import TRACKER_FILE, remove_superseded_checkpoints
from dataflex_rl.backends.verl.job import VerlRunJob
from dataflex_rl.backends.verl.launch import (LoggedStep, VerlRunError, metrics_frame, read_verl_metrics, run_verl,
                                             train_verl_run)
from dataflex_rl.backends.verl.reward import compute_score
from dataflex_rl.backends.model_spec import ModelSpec
from dataflex_rl.study.config_checks import model_errors, policy_errors
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import CATALOGUE, Family
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.regimes.noisy_rewards import NOISY_REWARD_KEY
from dataflex_rl.report.figures import training_curves
from dataflex_rl.study.resolved import Study
from dataflex_rl.corpus.build import build_corpus

SMOKE = yaml.safe_load((Path(__file__).resolve().parents[1] / "config/smoke.yaml").read_text())
PAPER_TEMPLATE = "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.\nAnswer:"
SOURCES = ["basic_arithmetic", "syllogism", "molar_mass"]
NOISY_ROW = 2


@pytest.fixture(scope="module")
def corpus_files(tmp_path_factory):
    """A corpus of three sources (4 rows each) with row NOISY_ROW marked by the noisy_rewards regime (p 0.3), and its
    verl export read back the way verl's loader reads it (pyarrow)."""
    root = tmp_path_factory.mktemp("verl_data")
    corpus, _ = build_corpus(SOURCES, 4, seed=1)
    corpus = corpus.reset_index(drop=True)
    metadata = json.loads(corpus.loc[NOISY_ROW, "metadata"])
    corpus.loc[NOISY_ROW, "metadata"] = json.dumps({**metadata, NOISY_REWARD_KEY: 0.3}, sort_keys=True)
    corpus.to_parquet(root / "corpus.parquet")
    rows = write_verl_corpus(root / "corpus.parquet", root / "train.parquet", PAPER_TEMPLATE)
    return corpus, rows, pd.read_parquet(root / "train.parquet")


def test_rows_after_the_corpus_are_numbered_from_its_end(corpus_files):
    """A prompt selection's own validation rows follow the corpus's in verl's schema (launch.train_verl_run)."""
    from dataflex_rl.backends.verl.dataset import verl_frame

    corpus, rows, exported = corpus_files
    following = verl_frame(corpus.head(3), PAPER_TEMPLATE, start=rows)
    assert [info["row"] for info in following["extra_info"]] == [rows, rows + 1, rows + 2]
    assert [info["row"] for info in exported["extra_info"]] == list(range(rows))
    assert ([list(p)[0]["content"] for p in following["prompt"]]
            == [list(p)[0]["content"] for p in exported["prompt"].head(3)])


def _gold(item: dict) -> str:
    """The right answer, worked out from the item's own data rather than read from its `answer`."""
    metadata = json.loads(item["metadata"])
    if item["source"] == "basic_arithmetic":
        return str(eval(metadata["expression"]))  # e.g. "57 + 65"
    if item["source"] == "syllogism":
        return "Yes" if metadata["is_valid"] else "No"
    return "ABCD"[metadata["options"].index(metadata["answer_text"])]  # molar_mass: the option holding the mass


def _wrong(item: dict) -> str:
    gold = _gold(item)
    if item["source"] == "basic_arithmetic":
        return str(int(gold) + 1)
    return {"Yes": "No", "No": "Yes"}.get(gold, "A" if gold != "A" else "B")


def test_the_export_keeps_the_corpus_order_and_renders_the_template(corpus_files):
    corpus, rows, exported = corpus_files
    assert rows == len(exported) == len(corpus) == 12
    assert list(exported.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info", "domain"]
    for index, (item, row) in enumerate(zip(corpus.to_dict("records"), exported.to_dict("records"))):
        question = item["prompt"]
        # the template filled by hand: {question} replaced, {{}} a literal {}
        expected = question + "\nPlease reason step by step, and put your final answer within \\boxed{}.\nAnswer:"
        assert list(row["prompt"]) == [{"role": "user", "content": expected}]
        assert row["data_source"] == item["source"] and row["ability"] == row["domain"] == item["domain"]
        assert row["reward_model"] == {"style": "rule", "ground_truth": item["answer"]}
        info = row["extra_info"]
        assert info["row"] == index and info["id"] == item["id"] and info["metadata"] == item["metadata"]
        assert info["question"] == question
        assert info["answer_format"] == item["answer_format"]
        assert info["noise_p"] == (0.3 if index == NOISY_ROW else None)


def test_the_reward_gives_the_hand_computed_verdicts(corpus_files):
    corpus, _, exported = corpus_files
    checked = 0
    for index, (item, row) in enumerate(zip(corpus.to_dict("records"), exported.to_dict("records"))):
        if index == NOISY_ROW:
            continue
        call = (row["data_source"], row["reward_model"]["ground_truth"], row["extra_info"])
        assert compute_score(call[0], _gold(item), *call[1:], seed=1) == 1.0, item
        assert compute_score(call[0], f"Answer: {_gold(item)}", *call[1:], seed=1) == 1.0, item
        assert compute_score(call[0], _wrong(item), *call[1:], seed=1) == 0.0, item
        assert compute_score(call[0], "", *call[1:], seed=1) == 0.0
        checked += 1
    assert checked == 11


def test_the_reward_equals_the_embedded_backends_on_the_same_items(corpus_files):
    corpus, _, exported = corpus_files
    items = [item for index, item in enumerate(corpus.to_dict("records")) if index != NOISY_ROW]
    rows = [row for index, row in enumerate(exported.to_dict("records")) if index != NOISY_ROW]
    responses = [[_gold(item), _wrong(item), f"Answer: {_gold(item)}", "I do not know"] for item in items]
    embedded = rollout_rewards([r for group in responses for r in group], items, [None] * len(items), rollouts=4,
                               seed=1, step=0)
    verl = [[compute_score(row["data_source"], response, row["reward_model"]["ground_truth"], row["extra_info"],
                           seed=1) for response in group] for row, group in zip(rows, responses)]
    assert embedded.tolist() == verl
    assert 0 < sum(map(sum, verl)) < 4 * len(items)  # both verdicts occur


def test_a_marked_prompt_gets_a_bernoulli_reward_unrelated_to_its_answer(corpus_files):
    corpus, _, exported = corpus_files
    row = exported.to_dict("records")[NOISY_ROW]
    gold = _gold(corpus.to_dict("records")[NOISY_ROW])

    def score(response, seed=1, info=row["extra_info"]):
        return compute_score(row["data_source"], response, row["reward_model"]["ground_truth"], info, seed=seed)

    responses = [f"attempt {i}: {gold}" for i in range(2000)]  # every one correct
    draws = [score(r) for r in responses]
    # Bernoulli(0.3) over 2000 draws: mean within 4 standard deviations (sqrt(0.21 / 2000) = 0.0102) of 0.3
    assert abs(sum(draws) / len(draws) - 0.3) < 4 * 0.0102
    assert draws == [score(r) for r in responses]  # a pure function of (seed, prompt id, response)
    assert draws != [score(r, seed=2) for r in responses]
    assert {score(r, info={**row["extra_info"], "noise_p": 1.0}) for r in ("", "x", gold)} == {1.0}
    assert {score(r, info={**row["extra_info"], "noise_p": 0.0}) for r in ("", "x", gold)} == {0.0}


def _log_verl_metrics(path: Path, steps: dict[int, dict]) -> None:
    """Write `steps` through verl's own file logger (trainer.logger=file), as a verl run does."""
    from verl.utils.tracking import FileLogger

    previous = os.environ.get("VERL_FILE_LOGGER_PATH")
    os.environ["VERL_FILE_LOGGER_PATH"] = str(path)
    try:
        logger = FileLogger("dataflex_rl", "run")
    finally:
        if previous is None:
            del os.environ["VERL_FILE_LOGGER_PATH"]
        else:
            os.environ["VERL_FILE_LOGGER_PATH"] = previous
    for step, data in steps.items():
        logger.log(data, step)
    logger.finish()


def _verl_step(step: int, attempt: int) -> dict:
    """One step's metrics as verl logs them: its own keys, the trainer's `dataflex/` ones, and some we do not keep."""
    return {"actor/pg_loss": -0.1 * step, "actor/kl_loss": 0.01 * step + attempt, "actor/pg_clipfrac": 0.002,
            "actor/grad_norm": 1.5, "response_length/mean": 100.0 + step, "timing_s/step": 30.0,
            "critic/score/mean": 0.5, "perf/mfu/actor": 0.3,
            "dataflex/mean_reward": 0.1 * step, "dataflex/kept_fraction": 0.5, "dataflex/all_dropped": False,
            "dataflex/p:math": 1 / 3}


def test_verls_metrics_become_ours_with_a_resumed_attempt_winning(tmp_path):
    pytest.importorskip("verl")
    _log_verl_metrics(tmp_path / "verl_metrics.attempt1.jsonl", {s: _verl_step(s, 1) for s in (1, 2, 3)})
    _log_verl_metrics(tmp_path / "verl_metrics.attempt2.jsonl", {s: _verl_step(s, 2) for s in (3, 4)})
    steps = read_verl_metrics([tmp_path / "verl_metrics.attempt1.jsonl", tmp_path / "verl_metrics.attempt2.jsonl"])
    frame = metrics_frame(steps, 4, "topk", 7, "sdpa")
    assert frame["step"].tolist() == [0, 1, 2, 3]  # verl's global step 1 is our step 0
    assert frame["kl"].tolist() == pytest.approx([1.01, 1.02, 2.03, 2.04])  # step 3 from the resumed attempt
    assert frame["mean_reward"].tolist() == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert frame["pg_loss"].tolist() == pytest.approx([-0.1, -0.2, -0.3, -0.4])
    assert set(frame.columns) == {"method", "seed", "step", "mean_reward", "kept_fraction", "all_dropped", "p:math",
                                  "pg_loss", "kl", "clip_fraction", "grad_norm", "mean_response_length", "seconds",
                                  "attention"}
    assert (frame["method"] == "topk").all() and (frame["seed"] == 7).all() and (frame["attention"] == "sdpa").all()
    with pytest.raises(VerlRunError, match=r"lack global steps \[5\] of 1..5"):
        metrics_frame(steps, 5, "topk", 7, "sdpa")


def _attempts(*spans):
    """Logged steps as read_verl_metrics gives them: attempt i (from 1) logged the steps of spans[i - 1]."""
    return {step: LoggedStep({**_verl_step(step, attempt), "timing_s/step": 30.0 + step},
                             Path(f"verl_metrics.attempt{attempt}.jsonl"))
            for attempt, span in enumerate(spans, 1) for step in span}


@pytest.mark.parametrize("spans, last, tracked, unlogged", [
    (([1, 2], [4, 5]), 5, 5, [3]),  # killed between step 3's checkpoint and its log; the resume started at 4
    (([1, 2, 3, 4],), 5, 5, [5]),  # killed after the final checkpoint: the rerun does not start verl again
    (([1], [3], [5]), 5, 5, [2, 4]),  # two such kills
    (([2, 3],), 3, 3, [1]),  # the first step's log lost; the next attempt resumed from its checkpoint
], ids=["middle", "final", "twice", "first"])
def test_a_step_checkpointed_but_never_logged_is_written_as_missing_with_a_warning(spans, last, tracked, unlogged,
                                                                                   capsys):
    frame = metrics_frame(_attempts(*spans), last, "topk", 7, "sdpa", tracked=tracked)
    assert frame["step"].tolist() == list(range(last))
    lost = frame["step"].isin([step - 1 for step in unlogged])
    assert frame.loc[lost, ["pg_loss", "kl", "grad_norm", "seconds", "mean_reward"]].isna().all(axis=None)
    assert frame.loc[~lost, "seconds"].tolist() == [30.0 + step for step in range(1, last + 1) if step not in unlogged]
    warned = capsys.readouterr().err
    assert all(f"lack global step {step}, which it checkpointed and was stopped before logging" in warned
               for step in unlogged)


@pytest.mark.parametrize("spans, last, tracked, missing", [
    (([1, 2, 4, 5],), 5, 5, "[3]"),  # a gap inside one attempt's log: not a kill
    (([1, 2], [5, 6]), 6, 6, "[3, 4]"),  # two steps lost between attempts: verl resumes from one checkpoint
    (([1, 2, 3, 4],), 5, None, "[5]"),  # the last step unlogged, and no checkpoint of it
    (([1, 2, 3, 4],), 5, 4, "[5]"),
], ids=["gap", "two-between", "no-checkpoint", "tracker-behind"])
def test_other_missing_steps_are_still_refused(spans, last, tracked, missing):
    with pytest.raises(VerlRunError, match=re.escape(f"lack global steps {missing} of 1..{last}")):
        metrics_frame(_attempts(*spans), last, "topk", 7, "sdpa", tracked=tracked)


@pytest.mark.parametrize("renamed", ["actor/kl_loss", "actor/pg_clipfrac", "response_length/mean"])
def test_a_mapped_verl_metric_missing_from_a_step_is_refused_naming_it_and_its_attempt(tmp_path, renamed):
    pytest.importorskip("verl")
    step3 = _verl_step(3, 2)
    step3[renamed.replace("/", "/renamed_")] = step3.pop(renamed)
    _log_verl_metrics(tmp_path / "verl_metrics.attempt1.jsonl", {s: _verl_step(s, 1) for s in (1, 2, 3)})
    _log_verl_metrics(tmp_path / "verl_metrics.attempt2.jsonl", {3: step3, 4: _verl_step(4, 2)})
    steps = read_verl_metrics([tmp_path / "verl_metrics.attempt1.jsonl", tmp_path / "verl_metrics.attempt2.jsonl"])
    assert len(metrics_frame(steps, 2, "topk", 7, "sdpa")) == 2  # the steps before it are whole
    with pytest.raises(VerlRunError) as refused:
        metrics_frame(steps, 4, "topk", 7, "sdpa")
    message = str(refused.value)
    assert message.startswith(f"{tmp_path / 'verl_metrics.attempt2.jsonl'}: global step 3 lacks verl's metric(s) "
                              f"['{renamed}']")
    assert "launch.py VERL_METRICS" in message


def _verl_checkpoint(checkpoint_dir: Path, step: int, tracked: bool = True) -> Path:
    """`global_step_<step>` as verl 0.9.1 saves it on one GPU (the actor's FSDP shards, fsdp_config.json and
    huggingface/ from utils/checkpoint/fsdp_checkpoint_manager.py; data.pt from trainer_base._save_checkpoint; the
    policy driver's state from our trainer), and the tracker naming it when the save finished."""
    folder = checkpoint_dir / f"global_step_{step}"
    actor = folder / "actor"
    (actor / "huggingface").mkdir(parents=True)
    for name in ("model", "optim", "extra_state"):
        (actor / f"{name}_world_size_1_rank_0.pt").write_bytes(b"shard")
    (actor / "fsdp_config.json").write_text("{}")
    (actor / "huggingface" / "config.json").write_text("{}")
    (folder / "data.pt").write_bytes(b"loader")
    (folder / "dataflex_rl_driver.pt").write_bytes(b"driver")
    if tracked:
        (checkpoint_dir / TRACKER_FILE).write_text(str(step))  # as verl writes it: the step as text
    return folder


def test_a_resumed_runs_older_checkpoints_go_and_the_tracked_one_stays(tmp_path):
    """A run saved steps 2 and 4 before a requeue (verl's own keep-1 removed only step 2's actor/), then the resumed
    process saved step 6 and died while saving step 8: steps 2 and 4 go whole, 6 (the tracker's) stays, and so does
    the unfinished 8, which the next attempt writes again. verl's own resume lookup still finds step 6."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path, get_checkpoint_tracker_filename

    checkpoints = tmp_path / "checkpoints"
    old = [_verl_checkpoint(checkpoints, step) for step in (2, 4)]
    shutil.rmtree(old[0] / "actor")
    kept = _verl_checkpoint(checkpoints, 6)
    unfinished = _verl_checkpoint(checkpoints, 8, tracked=False)
    (checkpoints / "global_step_x").mkdir()  # not verl's: left alone
    assert get_checkpoint_tracker_filename(str(checkpoints)) == str(checkpoints / TRACKER_FILE)

    assert remove_superseded_checkpoints(checkpoints) == old
    assert sorted(p.name for p in checkpoints.iterdir()) == ["global_step_6", "global_step_8", "global_step_x",
                                                             TRACKER_FILE]
    assert len(list(kept.rglob("*"))) == len(list(unfinished.rglob("*"))) == 9  # both untouched
    assert find_latest_ckpt_path(str(checkpoints)) == str(kept)
    assert remove_superseded_checkpoints(checkpoints) == []  # once is enough


@pytest.mark.parametrize("tracker", [None, "9"], ids=["no tracker yet", "tracker naming a missing folder"])
def test_nothing_is_removed_without_a_complete_checkpoint(tmp_path, tracker):
    first = _verl_checkpoint(tmp_path, 1, tracked=False)
    second = _verl_checkpoint(tmp_path, 2, tracked=False)
    if tracker:
        (tmp_path / TRACKER_FILE).write_text(tracker)
    assert remove_superseded_checkpoints(tmp_path) == []
    assert first.is_dir() and second.is_dir()


METHOD = MethodSpec("topk", "topk", {"fraction": 0.5}, Family.selection, "baseline")
SETTINGS = GRPOSettings(steps=3, prompts_per_step=4, rollouts=5, checkpoint_every=1)


def test_a_finished_run_writes_its_inputs_metrics_and_final_model_without_relaunching(tmp_path, corpus_files):
    """The state folder of a run whose verl process reached the last step (verl's checkpoint layout and file-logger
    output, built here): the train job writes the parquet and the job file, and hands on the final actor folder."""
    pytest.importorskip("verl")
    corpus, _, _ = corpus_files
    corpus.to_parquet(tmp_path / "corpus.parquet")
    state = tmp_path / "state"
    resumed_from = _verl_checkpoint(state / "checkpoints", 2)  # a requeued attempt resumed from step 2
    actor = _verl_checkpoint(state / "checkpoints", 3) / "actor"
    _log_verl_metrics(state / "verl_metrics.attempt1.jsonl", {s: _verl_step(s, 1) for s in (1, 2, 3)})

    runtime = train_verl_run("Qwen/Qwen2.5-7B", corpus=tmp_path / "corpus.parquet", method=METHOD, seed=7,
                             training=SETTINGS, template=PAPER_TEMPLATE, out_model=tmp_path / "final",
                             out_metrics=tmp_path / "metrics.parquet", state_dir=state, gpus=1, cpus=2)
    assert runtime == {"attention": "flash_attention_2" if importlib.util.find_spec("flash_attn") else "sdpa"}
    assert len(pd.read_parquet(state / "train.parquet")) == 12
    assert VerlRunJob.read(state / "job.json") == VerlRunJob(METHOD, 7, str(state / "train.parquet"), 5)
    assert not resumed_from.exists()
    final = tmp_path / "final"
    assert sorted(p.relative_to(final).as_posix() for p in final.rglob("*")) == [
        "extra_state_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface", "huggingface/config.json",
        "model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt"]
    shard = final / "model_world_size_1_rank_0.pt"
    assert shard.stat().st_ino == (actor / "model_world_size_1_rank_0.pt").stat().st_ino  # a link, not a copy
    metrics = pd.read_parquet(tmp_path / "metrics.parquet")
    assert metrics["step"].tolist() == [0, 1, 2]
    curves = training_curves(metrics.assign(model="qwen"), window=2)  # the training_curves rule reads them
    assert curves["mean_reward"].tolist() == pytest.approx([0.1, 0.15, 0.25])


def test_a_run_without_its_final_checkpoint_is_refused_naming_it(tmp_path):
    from dataflex_rl.backends.verl.launch import keep_final_model

    with pytest.raises(VerlRunError, match="global_step_3/actor: verl's final actor checkpoint is missing"):
        keep_final_model(tmp_path / "checkpoints" / "global_step_3" / "actor", tmp_path / "final")


def test_a_failing_verl_process_is_refused_naming_its_log(tmp_path, capsys):
    """The real `python -m verl.trainer.main_ppo`, stopped by Hydra at a key its config does not have (before Ray)."""
    pytest.importorskip("verl")
    with pytest.raises(VerlRunError, match=r"exited with code 1; its output is in .*verl\.attempt1\.log") as error:
        run_verl(["trainer.no_such_key=1"], tmp_path)
    log = (tmp_path / "verl.attempt1.log").read_text()
    assert "no_such_key" in log and "no_such_key" in capsys.readouterr().err  # streamed to the job's log too
    assert str(tmp_path) in str(error.value)
    with pytest.raises(VerlRunError, match=r"verl\.attempt2\.log"):  # a rerun is a new attempt, the first log kept
        run_verl(["trainer.no_such_key=1"], tmp_path)
    assert (tmp_path / "verl.attempt1.log").read_text() == log


@pytest.mark.parametrize("gpus", [0, -1])
def test_a_verl_train_job_without_gpus_is_refused(tmp_path, gpus):
    with pytest.raises(ValueError, match=f"has gpus={gpus}: verl trains on GPUs — give the train rule a `gpu`"):
        get_backend("verl").train(TrainJob({"backend": "verl", "path": "m"}, "{question}", METHOD, 1, SETTINGS),
                                  base=None, corpus=tmp_path / "c.parquet", out_model=None, out_metrics=None,
                                  state_dir=tmp_path, threads=1, token_caps=None, gpus=gpus)


def test_a_prompt_selections_adam_preconditioning_is_refused_on_a_verl_model_naming_each(tmp_path):
    entries = {"baseline": {"policy": "baseline"}, "topk": {"policy": "topk", "control": "baseline"},
               "gradalign": {"policy": "gradalign", "params": {"precondition": "adam"}, "control": "baseline"},
               "plain": {"policy": "gradalign", "control": "baseline"},
               "simacc": {"policy": "simacc", "params": {"precondition": "adam"}}}
    methods = {name: MethodSpec(name, entry["policy"], entry.get("params", {}), CATALOGUE[entry["policy"]].family,
                                entry.get("control")) for name, entry in entries.items()}
    qwen = ModelSpec.from_entry("qwen", {"backend": "verl", "path": "Qwen/Qwen2.5-7B"})
    errors = get_backend("verl").config_errors("models.qwen", qwen, tmp_path, False, methods)
    assert [e.split(":")[0] for e in errors] == ["methods.gradalign.params.precondition",
                                                 "methods.simacc.params.precondition"]
    assert "which on the verl backend lives in the FSDP optimiser shards" in errors[0]
    tiny = ModelSpec.from_entry("tiny", {"backend": "embedded"})
    assert get_backend("embedded").config_errors("models.tiny", tiny, tmp_path, False, methods) == []
    # a policy not in the catalogue is refused before the study is resolved, so no backend sees it
    assert [e.split(":")[0] for e in policy_errors({**entries, "typo": {"policy": "gradalgn"}})] == [
        "methods.typo.policy"]


@pytest.mark.parametrize("campaigns, refused", [
    (None, ["methods.gradalign.params.precondition"]),  # no campaigns: every method trains on every model
    ({"main": {"models": ["tiny"]}}, []),  # only the embedded model trains
    ({"cpu": {"models": ["tiny"], "methods": ["baseline", "gradalign"]},
      "gpu": {"models": ["qwen"], "methods": ["baseline", "topk"]}}, []),
    ({"cpu": {"models": ["tiny"], "methods": ["baseline"]}, "gpu": {"methods": ["baseline", "gradalign"]}},
     ["methods.gradalign.params.precondition"]),  # a campaign naming no models trains them all
])
def test_a_verl_refusal_of_a_prompt_selection_holds_only_where_a_campaign_trains_it_on_a_verl_model(
        tmp_path, campaigns, refused):
    config = {**SMOKE,
              "models": {"tiny": {"backend": "embedded"}, "qwen": {"backend": "verl", "path": "Qwen/Qwen2.5-7B"}},
              "methods": {"baseline": {"policy": "baseline"}, "topk": {"policy": "topk", "control": "baseline"},
                          "gradalign": {"policy": "gradalign", "params": {"precondition": "adam"},
                                        "control": "baseline"}}}
    if campaigns:
        config["campaigns"] = campaigns
    assert [error.split(":")[0] for error in model_errors(Study.from_config(config), tmp_path)] == refused
