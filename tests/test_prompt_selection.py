"""Prompt selection in a run: the candidate stream, the validation hold-out, the rounds of the embedded trainer, their
metrics and a resume inside a round (the scores themselves: tests/test_gradalign_scores.py)."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

from dataflex_rl.artefacts import layout
from dataflex_rl.artefacts.items import BENCHMARK_ITEM_COLUMNS
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.backends.registry import get_backend
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.policies.driver import PolicyDriver
from dataflex_rl.prompt_selection.benchmark_split import validation_positions
from dataflex_rl.prompt_selection.candidates import CandidateStream, training_rows, validation_rows
from dataflex_rl.prompt_selection.gradients import group_gradients
from dataflex_rl.prompt_selection.scores import zero_advantage
from dataflex_rl.prompt_selection.selector import RowLabels
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.corpus.prompting import render_prompt
from dataflex_rl.regimes.noisy_rewards import NOISY_REWARD_KEY
from tiny_base import TEMPLATE, tiny_base

ROUND = {"candidates_per_round": 12, "selection_ratio": 3, "steps_per_round": 2, "rollouts_candidate": 4,
         "rollouts_validation": 6, "validation_size": 4}


def test_chunks_are_disjoint_cycle_and_depend_on_the_seed_alone():
    pool = list(range(100, 150))
    stream = CandidateStream(pool, 12, seed=3)
    chunks = [stream.chunk(r) for r in range(stream.chunks)]
    assert stream.chunks == 50 // 12 == 4
    assert len({row for chunk in chunks for row in chunk}) == 48  # disjoint; the last 2 rows are never candidates
    assert stream.chunk(4) == stream.chunk(0)  # round r scores chunk r mod ⌊N/M⌋
    assert CandidateStream(pool, 12, seed=3).chunk(2) == chunks[2]
    assert CandidateStream(pool, 12, seed=4).chunk(0) != chunks[0]


def test_validation_prompts_are_trustworthy_and_fixed_across_seeds():
    domains = ["math", "science"] * 20
    corrupted = [row % 4 == 1 for row in range(40)]  # every other science row is reward-noised
    labels = RowLabels(domains, corrupted, [False] * 40, target_domain="science")
    eligible = labels.eligible_for_validation()
    assert eligible == [row for row in range(40) if row % 4 == 3]
    assert validation_rows(eligible, 5, seed=0) == validation_rows(eligible, 5, seed=0)
    assert set(validation_rows(eligible, 5, seed=0)) <= set(eligible)
    with pytest.raises(ValueError, match="validation_size 11 exceeds the 10 corpus rows eligible"):
        validation_rows(eligible, 11, seed=0)


def test_a_round_walks_its_kept_rows_in_whole_passes():
    kept = [5, 9, 11, 20]
    walk = training_rows(kept, seed=1, round_index=2, offset=0, count=12)  # I·B = 12 = 3 passes over 4 kept rows
    for epoch in range(3):
        assert sorted(walk[4 * epoch:4 * epoch + 4]) == kept
    assert training_rows(kept, 1, 2, offset=6, count=3) == walk[6:9]


def test_fractions_count_each_label_and_say_when_a_label_is_absent():
    labels = RowLabels(["math", "logic", "logic", "math"], [True, False, True, False], [False] * 4, "logic")
    shares = labels.fractions([0, 1, 2])
    assert shares["corrupted"] == pytest.approx(2 / 3) and shares["target"] == pytest.approx(2 / 3)
    assert math.isnan(shares["easy"])  # no easy prompt in the corpus: not 0, unknown


def _driver(policy, family, seed, labels, draws, **params):
    return PolicyDriver(MethodSpec(policy, policy, params, family), labels.domains, seed, labels, draws)


def test_every_method_of_a_corpus_holds_out_the_study_validation_rows():
    """The study's validation draws on a corpus are held out of every run on it: a baseline's prompt stream, a
    mixture's and a response policy's never draw them, and the prompt selections' pool is the same set of rows."""
    domains = ["math", "science"] * 30
    corrupted = [row % 4 == 1 for row in range(60)]
    labels = RowLabels(domains, corrupted, [False] * 60, target_domain="science")
    draws = [(4, 0), (6, 1)]  # two prompt selections of the study, validation_size 4 and 6
    small = _driver("gradalign", Family.prompt_selection, 2, labels, draws, **ROUND).selector
    large = _driver("accgreedy", Family.prompt_selection, 2, labels, draws, **{**ROUND, "validation_size": 6,
                                                                                "validation_seed": 1}).selector
    held_out = set(small.validation) | set(large.validation)
    assert len(small.validation) == 4 and len(large.validation) == 6
    assert held_out <= {row for row in range(60) if row % 4 == 3}  # clean science rows only
    expected_pool = [row for row in range(60) if row not in held_out]
    assert list(small.pool) == list(large.pool) == expected_pool
    for policy, family in (("baseline", Family.none), ("difffilter", Family.selection)):
        drawn = _driver(policy, family, 2, labels, draws).draw(len(expected_pool))  # one whole pass over the stream
        assert sorted(drawn) == expected_pool, policy
    mixed = _driver("static", Family.mixture, 2, labels, draws).draw(5 * len(expected_pool))  # domain-first draws
    assert set(mixed) == set(expected_pool)
    # the same rows for every seed; without draws (no prompt selection on the corpus) nothing is held out
    other_seed = _driver("baseline", Family.none, 9, labels, draws)
    assert sorted(other_seed.draw(len(expected_pool))) == expected_pool
    assert sorted(_driver("baseline", Family.none, 2, labels, ()).draw(60)) == list(range(60))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("selection")
    corpus = tiny_base(root, WarmupSettings(steps=20, batch_size=16, learning_rate=0.003), items_per_domain=40)
    marked = corpus.copy()
    marked.loc[::2, "metadata"] = [json.dumps({**json.loads(m or "{}"), NOISY_REWARD_KEY: 0.5})
                                   for m in marked.loc[::2, "metadata"]]
    return root, marked


def _trainer(root, corpus, policy, steps=6, seed=5, checkpoint_every=3, **params):
    settings = GRPOSettings(steps=steps, prompts_per_step=4, rollouts=4, max_new_tokens=4,
                            checkpoint_every=checkpoint_every)
    method = MethodSpec(policy, policy, {**ROUND, **params}, Family.prompt_selection)
    return EmbeddedGRPOTrainer(root / "base", corpus, method, seed, settings, TEMPLATE,
                               open_probe=get_backend("embedded").open_probe)


def _rounds(metrics: pd.DataFrame) -> pd.DataFrame:
    return metrics.dropna(subset=["round"]).set_index("round")


@pytest.mark.parametrize("checkpoint_every", [3, 2])  # resumed inside a round, and at a round's start
def test_resume_reproduces_the_rounds_bit_identically(workspace, tmp_path, checkpoint_every):
    root, corpus = workspace
    straight = _trainer(root, corpus, "gradalign", checkpoint_every=checkpoint_every)
    expected = straight.train(tmp_path / "straight", progress=False)
    _trainer(root, corpus, "gradalign", steps=checkpoint_every, checkpoint_every=checkpoint_every).train(
        tmp_path / "resumed", progress=False)
    resumed = _trainer(root, corpus, "gradalign", checkpoint_every=checkpoint_every)
    got = resumed.train(tmp_path / "resumed", progress=False)
    seconds = [c for c in expected.columns if "seconds" in c]
    pd.testing.assert_frame_equal(got.drop(columns=seconds), expected.drop(columns=seconds))
    assert resumed.driver.selector.state_dict() == straight.driver.selector.state_dict()  # the last round's kept set
    for (name, x), (_, y) in zip(resumed.model.state_dict().items(), straight.model.state_dict().items()):
        assert torch.equal(x, y), name


def test_the_trainer_reaches_its_probe_through_the_backend_seam(workspace):
    """The embedded backend's `open_probe` gives the trainer the probe its rounds measure: per-group gradients equal
    to one plain backward per group (`method="loop"`) on the same rollouts, zero for zero-advantage groups."""
    root, corpus = workspace
    trainer = _trainer(root, corpus, "gradalign")
    probe = trainer.probe
    assert probe is not None and probe.temperature == trainer.settings.temperature  # score_temperature unset
    rollouts = probe.rollouts(list(range(12)), samples=4, stream="seam", noisy=True)
    got = probe.group_gradients(rollouts, "token_mean")
    expected = torch.cat([group_gradients(trainer.model, generated, rollouts.rewards[:generated.prompt_ids.shape[0]],
                                          aggregation="token_mean", method="loop")
                          for generated in rollouts.tokens])
    assert len(rollouts.tokens) == 1 and got.shape == expected.shape == (12, probe.module_slices().size)
    zero = zero_advantage(rollouts.rewards)
    assert (~zero).any() and not got[zero].any()
    assert (got - expected).abs().max() <= 1e-5
    assert (probe.summed_gradient(rollouts, "token_mean") - expected.sum(0)).abs().max() <= 1e-5


def test_a_prompt_selection_without_a_probe_is_refused(workspace):
    root, corpus = workspace
    settings = GRPOSettings(steps=1, prompts_per_step=4, rollouts=4, max_new_tokens=4)
    method = MethodSpec("gradalign", "gradalign", ROUND, Family.prompt_selection)
    with pytest.raises(ValueError, match="method 'gradalign' selects prompts by a probe of the training model, and "
                                         "the trainer was given none"):
        EmbeddedGRPOTrainer(root / "base", corpus, method, 5, settings, TEMPLATE)


def test_rounds_keep_floor_m_over_q_and_record_their_composition(workspace, tmp_path):
    root, corpus = workspace
    trainer = _trainer(root, corpus, "gradalign")
    rounds = _rounds(trainer.train(tmp_path / "run", progress=False))
    assert list(rounds.index) == [0, 1, 2]  # 6 steps, a round every 2
    assert (rounds["round_kept"] == 12 // 3).all() and (rounds["round_candidates"] == 12).all()
    assert (rounds["round_epochs"] == 2 * 4 / 4).all()  # I·B/|S_r|
    assert rounds["round_chunk_corrupted"].between(0, 1).all()  # half the corpus is marked
    assert rounds["round_kept_target"].isna().all()  # no unbalanced regime: no target domain
    histogram = [json.loads(h) for h in rounds["round_pass_rate_histogram"]]
    assert all(len(h) == 4 + 1 and sum(h) == 12 for h in histogram)
    assert rounds["round_validation_pass_rate"].between(0, 1).all()
    assert all(json.loads(modules) for modules in rounds["round_top_modules"])
    validation = set(trainer.driver.selector.validation)
    assert not any(corpus["metadata"].iloc[sorted(validation)].str.contains(NOISY_REWARD_KEY))


def test_a_validation_file_gives_the_validation_prompts_and_holds_nothing_out_of_the_corpus(workspace, tmp_path):
    """With `validation: {path}` the validation prompts are the file's rows (validation_size of them, drawn by
    validation_seed), rolled out and back-propagated by the probe; every corpus row stays in the pool."""
    root, corpus = workspace
    clean = corpus[~corpus["metadata"].str.contains(NOISY_REWARD_KEY)]
    held, trained_on = clean.tail(6), corpus.drop(clean.tail(6).index).reset_index(drop=True)
    path = tmp_path / "validation.jsonl"
    held[["id", "domain", "prompt", "answer", "answer_format"]].to_json(path, orient="records", lines=True)
    trainer = _trainer(root, trained_on, "gradalign", steps=2, validation={"path": str(path)}, validation_size=5)
    selector = trainer.driver.selector
    assert list(selector.pool) == list(range(len(trained_on)))  # nothing of the corpus is held out
    assert len(selector.validation) == 5 and min(selector.validation) >= len(trained_on)
    assert {trainer.items[row]["prompt"] for row in selector.validation} <= set(held["prompt"])
    rounds = _rounds(trainer.train(tmp_path / "run", progress=False))
    assert rounds.loc[0, "round_validation_size"] == 5
    drawn = [row for step in range(2) for row in trainer.driver.draw(4, step, trainer.probe)]
    assert max(drawn) < len(trained_on)  # the file's prompts are scored against, never trained on
    # the probe decodes a row from its prompt tokens: for the validation rows, the file's prompts as templated
    assert not math.isnan(rounds.loc[0, "round_validation_pass_rate"])  # the validation rollouts were drawn
    for row in selector.validation:
        text = render_prompt(trainer.items[row]["prompt"], TEMPLATE, trainer.tokenizer)
        assert list(trainer.prompt_tokens[row]) == trainer.tokenizer(text).input_ids


def test_a_validation_benchmark_gives_the_items_its_split_holds_out_as_the_validation_prompts(workspace, tmp_path,
                                                                                                  monkeypatch):
    """With `validation: {benchmark: gcd}` the validation prompts are gcd's items at the positions the study holds out
    of gcd's test score (benchmark_split.validation_positions, which the records and the scenario tables read), in
    the items file's order; every corpus row stays in the pool."""
    root, corpus = workspace
    clean = corpus[~corpus["metadata"].str.contains(NOISY_REWARD_KEY)]
    items = clean.tail(9).assign(benchmark="gcd", id=[f"gcd-{i}" for i in range(9)])
    trained_on = corpus.drop(items.index).reset_index(drop=True)
    monkeypatch.chdir(tmp_path)  # the trainer reads results/benchmarks/gcd.parquet, as a train job in its workdir
    Path(layout.benchmark_items("gcd")).parent.mkdir(parents=True)
    items[list(BENCHMARK_ITEM_COLUMNS)].to_parquet(layout.benchmark_items("gcd"))
    trainer = _trainer(root, trained_on, "gradalign", steps=2, validation={"benchmark": "gcd"}, validation_size=5,
                       validation_seed=3)
    selector = trainer.driver.selector
    assert list(selector.pool) == list(range(len(trained_on)))  # nothing of the corpus is held out
    positions = validation_positions("gcd", 9, [[5, 3]])
    assert {row - len(trained_on) for row in selector.validation} == positions
    assert {trainer.items[row]["id"] for row in selector.validation} == {f"gcd-{p}" for p in positions}
    rounds = _rounds(trainer.train(tmp_path / "run", progress=False))
    assert rounds.loc[0, "round_validation_size"] == 5
    assert not math.isnan(rounds.loc[0, "round_validation_pass_rate"])  # the items were rolled out and verified


def test_methods_of_a_seed_score_the_same_candidates(workspace, tmp_path):
    """Round 0 starts from the same base: the same chunk and the same candidate rollouts for every method."""
    root, corpus = workspace
    first = {}
    for policy in ("gradalign", "accgreedy", "random_prompts"):
        rounds = _rounds(_trainer(root, corpus, policy, steps=2).train(tmp_path / policy, progress=False))
        first[policy] = rounds.loc[0, ["round_chunk_corrupted", "round_chunk_pass_rate", "round_pass_rate_histogram"]]
    assert first["gradalign"].equals(first["accgreedy"]) and first["gradalign"].equals(first["random_prompts"])


# --- the selection tables -------------------------------------------------------------------------------------------

def _round_row(round_index, step, corrupted, phases=(1.0, 2.0, 0.5)):
    return {"step": step, "seconds": 4.0, "round": round_index, "round_candidates": 144, "round_kept": 24,
            "round_rollouts_candidate": 8, "round_rollouts_validation": 16, "round_validation_size": 32,
            "round_epochs": 5.0, "round_training_rollouts": 5, "round_chunk_corrupted": 0.5,
            "round_kept_corrupted": corrupted, "round_chunk_target": float("nan"), "round_kept_target": float("nan"),
            "round_chunk_easy": float("nan"), "round_kept_easy": float("nan"),
            **dict(zip(("round_seconds_candidate_rollouts", "round_seconds_candidate_backward",
                        "round_seconds_validation"), phases))}


def _run_metrics(method, seed, kept_corrupted):
    """Two rounds of two steps each; every step takes 4 s, the rounds' selection 3.5 s of its first step."""
    rows = []
    for round_index, corrupted in enumerate(kept_corrupted):
        rows.append(_round_row(round_index, 2 * round_index, corrupted))
        rows.append({"step": 2 * round_index + 1, "seconds": 4.0})
    return pd.DataFrame(rows).assign(model="cell", method=method, seed=seed)


def test_selection_tables_against_hand_computed_values():
    from scipy import stats

    from dataflex_rl.report.selection import (flop_overhead, selection_composition, selection_overhead,
                                              selection_rounds)

    kept = {"gradalign": {1: (0.30, 0.10), 2: (0.40, 0.20), 3: (0.35, 0.05)},
            "random": {1: (0.50, 0.45), 2: (0.55, 0.50), 3: (0.45, 0.60)}}
    metrics = pd.concat([_run_metrics(m, s, values) for m, seeds in kept.items() for s, values in seeds.items()])
    rounds = selection_rounds(metrics)
    assert len(rounds) == 2 * 2 * 3
    assert (rounds["round_seconds_selection"] == 3.5).all()
    assert (rounds["round_seconds_training"] == 2 * 4.0 - 3.5).all()  # the round's two steps, less its selection

    table = selection_composition(rounds, {"cell": "random"}, confidence=0.95).set_index(["method", "round"])
    last = [100 * (kept["gradalign"][s][1] - kept["random"][s][1]) for s in (1, 2, 3)]
    mean, sem = sum(last) / 3, stats.sem(last)
    low, high = stats.t.interval(0.95, 2, loc=mean, scale=sem)
    row = table.loc[("gradalign", "last")]
    assert row["kept_corrupted_pct"] == pytest.approx(100 * (0.10 + 0.20 + 0.05) / 3)
    assert row["chunk_corrupted_pct"] == pytest.approx(50.0)
    assert (row["corrupted_vs_random"], row["corrupted_vs_random_low"], row["corrupted_vs_random_high"]) == \
        pytest.approx((mean, low, high))
    assert math.isnan(table.loc[("random", "first"), "corrupted_vs_random"])  # the reference itself
    assert table.loc[("gradalign", "1")].equals(row)  # the per-round rows: round 1 is the last

    # GradAlign's FLOP model with the family's defaults: (8·144·8 + 6·32·16) / (6·24·(5·5)) = 12288 / 3600
    assert flop_overhead(rounds.iloc[0], "validation_gradient") == pytest.approx(12288 / 3600)
    assert flop_overhead(rounds.iloc[0], "pass_rate") == pytest.approx(2 * 144 * 8 / 3600)
    overhead = selection_overhead(rounds, {"gradalign": "validation_gradient", "random": None}).set_index("method")
    assert overhead.loc["gradalign", "measured_pct"] == pytest.approx(100 * 3.5 / 4.5)
    assert overhead.loc["gradalign", "q_k_r_over_n_t"] == pytest.approx(6 * 8 / 25)
