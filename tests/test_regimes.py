"""The regime transforms (dataflex_rl/regimes/) against answers known by hand: exact counts (round half up), domain
shares, wrong golds that the real verifiers reject the true answer against, Bernoulli rewards independent of the
response (scipy tests), determinism, and a noisy-reward training run resumed mid-way."""
import json
import warnings
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pandas as pd
import pytest
import torch
from scipy import stats

from dataflex_rl.backends.embedded.generation import EmbeddedGenerator
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.backends.embedded.rewards import rollout_rewards
from dataflex_rl.backends.embedded.trainer import EmbeddedGRPOTrainer
from dataflex_rl.item_sources.registry import get_benchmark
from dataflex_rl.artefacts.items import CORPUS_COLUMNS, item_metadata
from dataflex_rl.policies.methods import MethodSpec
from dataflex_rl.policies.catalogue import Family
from dataflex_rl.training.recipe import GRPOSettings
from dataflex_rl.regimes.low_utility import measure_solve_rates
from dataflex_rl.regimes.noisy_rewards import NOISY_REWARD_KEY, noisy_reward
from dataflex_rl.regimes.catalogue import REGIMES, regime_errors
from dataflex_rl.regimes.registry import TRANSFORMS, apply_regime
from dataflex_rl.regimes.sampling import largest_remainder
from dataflex_rl.corpus.build import build_corpus, load_benchmark_file
from dataflex_rl.corpus.prompting import render_item_prompt
from dataflex_rl.verify.verifiers import reward
from tiny_base import TEMPLATE, tiny_base

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "benchmarks"
ALL_SOURCES = ["basic_arithmetic", "chain_sum", "products", "gcd", "simple_equations", "syllogism",
               "family_relationships", "aiw", "letter_counting", "unit_conversion", "molar_mass", "kinematics"]
BENCHMARK_FILES = {"MATH-500": "math500.jsonl", "GSM8K": "gsm8k_test.jsonl", "AIME-2024": "aime2024.jsonl",
                   "GPQA-Diamond": "gpqa_diamond.jsonl", "MMLU-Pro-physics": "mmlu_pro_physics.jsonl",
                   "Knights&Knaves": "knights_knaves_hard.jsonl",
                   "BBH-logical-deduction": "bbh_logical_deduction.jsonl"}


def half_up(fraction: float, n: int) -> int:
    return int((Decimal(str(fraction)) * n).quantize(Decimal(1), rounding=ROUND_HALF_UP))


@pytest.fixture(scope="module")
def corpus():
    """A real corpus from all 12 procedural sources."""
    built, _ = build_corpus(ALL_SOURCES, 150, seed=1)
    return built


@pytest.fixture(scope="module")
def benchmark_corpus():
    """Real-benchmark items of the math, multiple-choice, Knights&Knaves and exact formats, as corpus rows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixtures are smaller than the benchmarks the authors scored
        frames = [load_benchmark_file(get_benchmark(name), FIXTURES / path) for name, path in BENCHMARK_FILES.items()]
    return pd.concat(frames, ignore_index=True)[list(CORPUS_COLUMNS)]


def balanced(corpus: pd.DataFrame, per_domain: int) -> pd.DataFrame:
    """The first `per_domain` rows of each domain."""
    return corpus.groupby("domain", sort=False).head(per_domain).reset_index(drop=True)


# --- label noise ----------------------------------------------------------------------------------------------------
def assert_wrong_golds(before: pd.DataFrame, after: pd.DataFrame, record: pd.DataFrame, fraction: float) -> None:
    changed = before["answer"].to_numpy() != after["answer"].to_numpy()
    assert int(changed.sum()) == half_up(fraction, len(before))
    assert before.drop(columns="answer").equals(after.drop(columns="answer"))  # nothing but golds changes
    assert record.loc[changed, "action"].eq("wrong_gold").all() and record.loc[~changed, "action"].eq("kept").all()
    assert record.loc[changed, "old_answer"].tolist() == before.loc[changed, "answer"].tolist()
    assert record.loc[changed, "new_answer"].tolist() == after.loc[changed, "answer"].tolist()
    for old, item in zip(before.loc[changed, "answer"], after[changed].to_dict("records")):
        assert reward(old, item) == 0.0, (item["id"], old, item["answer"])  # the true answer is now wrong
        assert reward(item["answer"], item) == 1.0, (item["id"], item["answer"])  # and the new gold reads as one


@pytest.mark.parametrize("fraction", [0.2, 0.35])
def test_label_noise_over_the_12_procedural_sources(corpus, fraction):
    out, record, audit = apply_regime("label_noise", {"fraction": fraction}, corpus, seed=3)
    assert_wrong_golds(corpus, out, record, fraction)
    assert audit["changed"] == half_up(fraction, len(corpus)) and sum(audit["wrong_gold_from"].values()) == \
        audit["changed"]
    assert set(out.loc[out["answer"] != corpus["answer"], "source"]) == set(ALL_SOURCES)


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_label_noise_over_math_choice_knights_knaves_and_exact_items(benchmark_corpus, fraction):
    out, record, _ = apply_regime("label_noise", {"fraction": fraction}, benchmark_corpus, seed=5)
    assert_wrong_golds(benchmark_corpus, out, record, fraction)
    relabelled = out[out["answer"] != benchmark_corpus["answer"]]
    if fraction == 1.0:
        assert set(relabelled["answer_format"]) == {"math", "multiple_choice", "knights_knaves", "exact"}
    choice = relabelled[relabelled["answer_format"] == "multiple_choice"]
    assert choice["answer"].str.fullmatch("[A-J]").all()  # another option letter, written as a gold


# --- subset ---------------------------------------------------------------------------------------------------------
def test_largest_remainder_by_hand():
    # quotas 3.5, 2.1, 1.4 -> floors 3, 2, 1, the one row left to the largest remainder (a)
    assert largest_remainder({"a": 5, "b": 3, "c": 2}, 7) == {"a": 4, "b": 2, "c": 1}
    # three equal remainders of 2/3 for two rows: ties go to the earlier names
    assert largest_remainder({"c": 1, "a": 1, "b": 1}, 2) == {"a": 1, "b": 1, "c": 0}


@pytest.mark.parametrize("fraction", [0.25, 0.1, 1.0])
def test_subset_keeps_exactly_round_fn_rows_at_domain_shares(corpus, fraction):
    out, record, audit = apply_regime("subset", {"fraction": fraction}, corpus, seed=2)
    assert len(out) == half_up(fraction, len(corpus)) == audit["kept"]
    proportional = corpus["domain"].value_counts() * len(out) / len(corpus)
    assert (out["domain"].value_counts() - proportional).abs().max() < 1
    assert out["id"].is_unique and out.merge(corpus, how="left", indicator=True)["_merge"].eq("both").all()
    assert set(record.loc[record["action"] == "kept", "id"]) == set(out["id"])


def test_subset_without_domain_shares_still_keeps_exactly_round_fn_rows(corpus):
    out, _, _ = apply_regime("subset", {"fraction": 0.3, "keep_domain_shares": False}, corpus, seed=2)
    assert len(out) == half_up(0.3, len(corpus))


# --- noisy rewards --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fraction,p", [(0.5, 0.5), (0.2, 0.3)])
def test_noisy_rewards_marks_round_fn_prompts_and_only_their_metadata(corpus, fraction, p):
    out, record, audit = apply_regime("noisy_rewards", {"fraction": fraction, "p": p}, corpus, seed=4)
    marked = out["metadata"].map(lambda text: json.loads(text).get(NOISY_REWARD_KEY)).notna()
    assert int(marked.sum()) == half_up(fraction, len(corpus)) == audit["marked"]
    assert (out.loc[marked, "metadata"].map(lambda text: json.loads(text)[NOISY_REWARD_KEY]) == p).all()
    assert out.loc[~marked].equals(corpus.loc[~marked])
    assert record.loc[marked, "action"].eq("noisy_reward").all()
    for before, after in zip(corpus.loc[marked].to_dict("records"), out.loc[marked].to_dict("records")):
        assert {k: v for k, v in item_metadata(after).items() if k != NOISY_REWARD_KEY} == item_metadata(before)


@pytest.mark.parametrize("p", [0.5, 0.2])
def test_noisy_rewards_are_bernoulli_p_whatever_the_answer(corpus, p):
    """The trainer's rewards of marked prompts: correct responses (the gold) and wrong ones ('') draw rewards of the
    same distribution (chi-square on the 2x2 table), at rate p (exact binomial test); unmarked prompts keep their
    verifier's verdict."""
    out, _, _ = apply_regime("noisy_rewards", {"fraction": 0.5, "p": p}, corpus.head(80), seed=4)
    items = out.to_dict("records")
    noise_p = [item_metadata(item).get(NOISY_REWARD_KEY) for item in items]
    rollouts, tables = 5, {True: [], False: []}
    for step in range(60):
        for correct in (True, False):
            responses = [item["answer"] if correct else "" for item in items for _ in range(rollouts)]
            rewards = rollout_rewards(responses, items, noise_p, rollouts, seed=9, step=step)
            marked = torch.tensor([q is not None for q in noise_p])
            assert (rewards[~marked] == float(correct)).all()
            tables[correct].append(rewards[marked].flatten())
    draws = {correct: torch.cat(values) for correct, values in tables.items()}
    counts = [[int(d.sum()), int((1 - d).sum())] for d in draws.values()]
    assert sum(counts[0]) >= 10_000
    assert stats.chi2_contingency(counts).pvalue > 0.01
    for ones, zeros in counts:
        assert stats.binomtest(ones, ones + zeros, p).pvalue > 0.01
        assert abs(ones / (ones + zeros) - p) < 0.02


def test_noisy_reward_is_a_pure_function_of_seed_prompt_step_rollout():
    draws = [noisy_reward(1, "q-7", step, rollout, 0.5) for step in range(50) for rollout in range(5)]
    assert draws == [noisy_reward(1, "q-7", step, rollout, 0.5) for step in range(50) for rollout in range(5)]
    assert draws != [noisy_reward(2, "q-7", step, rollout, 0.5) for step in range(50) for rollout in range(5)]
    assert {noisy_reward(1, "q", s, 0, 1.0) for s in range(100)} == {1.0}
    assert {noisy_reward(1, "q", s, 0, 0.0) for s in range(100)} == {0.0}


# --- unbalanced -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target,share,expected", [
    # 200 other rows stay whole; round(0.2 * 200 / 0.8) = 50 science rows: 50 / 250 = 0.2
    ("science", 0.2, {"science": 50, "logic": 100, "math": 100}),
    # 0.12 of the pool: round(0.12 * 200 / 0.88) = round(27.27) = 27 math rows
    ("math", 0.12, {"math": 27, "logic": 100, "science": 100}),
    # too few target rows for 0.6: all 100 stay, the others are cut to round(100 * 0.4 / 0.6) = 67, split 34/33
    # (equal remainders: the earlier name, logic, gets the odd row)
    ("science", 0.6, {"science": 100, "logic": 34, "math": 33}),
    ("logic", 1.0, {"logic": 100}),
    ("logic", 0.0, {"math": 100, "science": 100}),
])
def test_unbalanced_holds_the_target_domain_at_its_share(corpus, target, share, expected):
    pool = balanced(corpus, 100)
    out, record, audit = apply_regime("unbalanced", {"target_domain": target, "share": share}, pool, seed=6)
    assert out["domain"].value_counts().to_dict() == expected
    assert audit["evaluation_domain"] == target and audit["target_rows"] == expected.get(target, 0)
    assert set(record.loc[record["action"] == "kept", "id"]) == set(out["id"])


# --- low utility ----------------------------------------------------------------------------------------------------
def test_low_utility_takes_only_prompts_measured_at_90_percent_or_more(corpus):
    pool = balanced(corpus, 100)
    # every third prompt solved 90% (easy), the next 89% (not easy), the others 10% or unmeasured
    rates = {prompt_id: (0.9, 0.89, 0.1)[i % 3] for i, prompt_id in enumerate(pool["id"]) if i % 10 != 9}
    easy = {prompt_id for prompt_id, rate in rates.items() if rate >= 0.9}
    out, record, audit = apply_regime("low_utility", {"share": 0.25}, pool, seed=7, solve_rates=rates)
    in_pool_easy = set(out["id"]) & easy
    others = len(pool) - len(easy)
    assert len(in_pool_easy) == half_up(0.25 * others / 0.75, 1) == audit["easy_rows"]  # others all stay
    assert len(out) == others + len(in_pool_easy)
    assert set(record.loc[record["action"] == "kept_easy", "id"]) == in_pool_easy
    assert "synthetic stand-in" in audit["note"]


def test_low_utility_refuses_without_measured_rates(corpus):
    with pytest.raises(ValueError, match="no measured solve rates.*measure_solve_rates"):
        apply_regime("low_utility", {"share": 0.5}, corpus, seed=7)
    with pytest.raises(ValueError, match="none of the .* prompts has a measured solve rate >= 0.9"):
        apply_regime("low_utility", {"share": 0.5}, corpus, seed=7, solve_rates={corpus["id"][0]: 0.5})


# --- determinism ----------------------------------------------------------------------------------------------------
CASES = [("label_noise", {"fraction": 0.2}), ("subset", {"fraction": 0.25}),
         ("noisy_rewards", {"fraction": 0.5, "p": 0.5}), ("unbalanced", {"target_domain": "math", "share": 0.12}),
         ("low_utility", {"share": 0.1})]


@pytest.mark.parametrize("transform,params", CASES, ids=[name for name, _ in CASES])
def test_same_seed_same_outputs_other_seed_other_outputs(corpus, transform, params):
    pool = balanced(corpus, 100)
    rates = {prompt_id: 1.0 for prompt_id in pool["id"][::2]}
    first = apply_regime(transform, params, pool, seed=11, solve_rates=rates)
    again = apply_regime(transform, params, pool, seed=11, solve_rates=rates)
    other = apply_regime(transform, params, pool, seed=12, solve_rates=rates)
    pd.testing.assert_frame_equal(first[0], again[0])
    pd.testing.assert_frame_equal(first[1], again[1])
    assert json.dumps(first[2], sort_keys=True) == json.dumps(again[2], sort_keys=True)
    assert not first[0].equals(other[0])


# --- parameter checks -----------------------------------------------------------------------------------------------
DOMAINS = ["logic", "math", "science"]
WHOLE_CORPUS = {"index": 0, "of": 1, "size": None}  # a solve-rate job's chunk on a one-stream backend (embedded)
BAD = [
    ("label_nosie", {"fraction": 0.2}, "unknown transform 'label_nosie'; did you mean 'label_noise'? (known: "),
    ("subset", {"fraction": 1.5}, "parameter 'fraction' of transform 'subset': 1.5 is outside (0, 1]; use a number in "
                                  "(0, 1]"),
    ("subset", {"fraction": 0}, "parameter 'fraction' of transform 'subset': 0 is outside (0, 1]"),
    ("label_noise", {"fraction": -0.1}, "parameter 'fraction' of transform 'label_noise': -0.1 is outside [0, 1]"),
    ("noisy_rewards", {"fraction": 0.5, "p": "half"}, "parameter 'p' of transform 'noisy_rewards': 'half' is not a "
                                                      "number; use a number in [0, 1]"),
    ("noisy_rewards", {"fraction": 0.5}, "parameter 'p' of transform 'noisy_rewards' is missing; add it"),
    ("label_noise", {"fraction": 0.2, "seed": 3}, "unknown parameter 'seed' for transform 'label_noise' (known: "
                                                  "fraction); remove it"),
    ("unbalanced", {"target_domain": "biology", "share": 0.12}, "parameter 'target_domain' of transform 'unbalanced': "
                                                                "'biology' is not a domain of the corpus, whose "
                                                                "domains are ['logic', 'math', 'science']"),
    ("subset", {"fraction": 0.5, "keep_domain_shares": "yes"}, "parameter 'keep_domain_shares' of transform 'subset': "
                                                               "'yes' is not true or false"),
]


def test_every_catalogued_transform_has_its_implementation():
    assert set(TRANSFORMS) == set(REGIMES)


@pytest.mark.parametrize("transform,params,message", BAD, ids=[f"{t}-{sorted(p)}" for t, p, _ in BAD])
def test_bad_regime_parameters_are_named_with_the_fix(transform, params, message):
    errors = regime_errors(transform, params, DOMAINS)
    assert len(errors) == 1 and message in errors[0]


def test_each_regime_refusal_is_documented():
    documented = (REPO / "docs/refusals.md").read_text()
    assert [message for _, _, message in BAD if message not in documented] == []


def test_good_parameters_pass_and_bad_ones_stop_apply_regime(corpus):
    assert all(regime_errors(name, params, DOMAINS) == [] for name, params in CASES)
    assert set(REGIMES) == {name for name, _ in CASES}
    with pytest.raises(ValueError, match="regime subset: parameter 'fraction' of transform 'subset': 2 is outside"):
        apply_regime("subset", {"fraction": 2}, corpus, seed=1)


# --- the embedded model: measured solve rates, and a noisy-reward run resumed -----------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("regimes")
    corpus = tiny_base(root, WarmupSettings(steps=5, batch_size=8), items_per_domain=30)
    return root, corpus


def test_measured_solve_rates_of_the_tiny_base(tiny):
    """K sampled answers per prompt at the training temperature: rates are multiples of 1/K, the same seed measures
    the same rates, and each equals the verifier's verdicts over the base's own K samples drawn here."""
    root, corpus = tiny
    items, samples = corpus.head(12), 4
    generator = EmbeddedGenerator.load(root / "base")
    rates = measure_solve_rates(generator, items, TEMPLATE, samples=samples, temperature=1.0, max_new_tokens=8,
                                batch_size=64, seed=3)
    assert set(rates) == set(items["id"])
    assert all(rate * samples == int(rate * samples) for rate in rates.values())
    assert rates == measure_solve_rates(generator, items, TEMPLATE, samples=samples, temperature=1.0,
                                        max_new_tokens=8, batch_size=64, seed=3)
    records = items.to_dict("records") * samples
    answers = generator.generate([render_item_prompt(r, TEMPLATE, generator.tokenizer) for r in records],
                                 max_new_tokens=8, batch_size=64, temperature=1.0, seed=3)
    by_hand = pd.DataFrame({"id": [r["id"] for r in records],
                            "reward": [reward(text, r) for (text, *_), r in zip(answers, records)]})
    assert rates == by_hand.groupby("id")["reward"].mean().to_dict()


def _trainer(root, corpus, steps):
    settings = GRPOSettings(steps=steps, prompts_per_step=4, rollouts=5, max_new_tokens=4, checkpoint_every=2)
    return EmbeddedGRPOTrainer(root / "base", corpus, MethodSpec("baseline", "baseline", {}, Family.none), 7, settings,
                               TEMPLATE)


@pytest.mark.parametrize("p", [1.0, 0.0])
def test_every_prompt_marked_gets_rewards_unrelated_to_its_answers(tiny, tmp_path, p):
    root, corpus = tiny
    noisy, _, _ = apply_regime("noisy_rewards", {"fraction": 1.0, "p": p}, corpus, seed=1)
    metrics = _trainer(root, noisy, steps=2).train(tmp_path / "run", progress=False)
    assert metrics["mean_reward"].tolist() == [p, p]


def test_resuming_a_noisy_reward_run_reproduces_its_rewards(tiny, tmp_path):
    root, corpus = tiny
    noisy, _, _ = apply_regime("noisy_rewards", {"fraction": 0.5, "p": 0.5}, corpus, seed=1)
    straight = _trainer(root, noisy, steps=4)
    expected = straight.train(tmp_path / "straight", progress=False).drop(columns="seconds")
    _trainer(root, noisy, steps=2).train(tmp_path / "resumed", progress=False)  # stops at the step-2 checkpoint
    resumed = _trainer(root, noisy, steps=4)
    got = resumed.train(tmp_path / "resumed", progress=False).drop(columns="seconds")
    pd.testing.assert_frame_equal(got, expected)
    for (name, x), (_, y) in zip(resumed.model.state_dict().items(), straight.model.state_dict().items()):
        assert torch.equal(x, y), name
    clean = _trainer(root, corpus, steps=4).train(tmp_path / "clean", progress=False)
    assert not clean["mean_reward"].equals(expected["mean_reward"])  # the marked prompts did change the rewards


def test_the_solve_rate_job_resumes_from_its_saved_parts_after_a_kill(tiny, tmp_path, monkeypatch):
    """The job (study.jobs.measure_base_solve_rates) measures the corpus in parts of the backend's solve_rate_part
    prompts, each saved as it finishes: killed in its third part, a retry measures only the parts not saved and writes
    the rates of an uninterrupted run byte for byte; a changed setting reuses nothing; the parts go once the output
    is written."""
    from dataflex_rl.artefacts.provenance import write_provenance
    from dataflex_rl.backends.embedded.backend import EmbeddedBackend
    from dataflex_rl.evaluate.shards import STATE
    from dataflex_rl.study import jobs

    root, corpus = tiny
    items = corpus.head(10)
    items.to_parquet(tmp_path / "corpus.parquet")
    write_provenance(root / "base" / "provenance.json", {"model": "tiny"}, [root / "base"])
    job = {"model": EmbeddedBackend().model_settings({}), "template": TEMPLATE,
           "sampling": {"rollouts": 4, "temperature": 1.0, "max_new_tokens": 8}}
    monkeypatch.setattr(EmbeddedBackend, "solve_rate_part", 4)  # 10 prompts: parts of 4, 4 and 2
    measured = []
    real = jobs.measure_solve_rates

    def killed_in_third_part(generator, part, *args, **kwargs):
        measured.append(list(part["id"]))
        if len(measured) == 3 and kill:
            raise KeyboardInterrupt("killed")
        return real(generator, part, *args, **kwargs)

    monkeypatch.setattr(jobs, "measure_solve_rates", killed_in_third_part)

    def run(out, sampling=job["sampling"]):
        jobs.measure_base_solve_rates({**job, "sampling": sampling}, WHOLE_CORPUS, base=root / "base",
                                      corpus=tmp_path / "corpus.parquet", out=out)

    kill = False
    run(tmp_path / "whole" / "rates.parquet")
    assert [len(ids) for ids in measured] == [4, 4, 2] and not any((tmp_path / "whole" / STATE).iterdir())
    measured.clear()
    kill = True
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "resumed" / "rates.parquet")
    assert len(list((tmp_path / "resumed" / STATE).glob("rates.*.part*of3.parquet"))) == 2
    kill = False
    measured.clear()
    run(tmp_path / "resumed" / "rates.parquet")
    assert measured == [list(items["id"][8:])]  # the first two parts were reused, the third measured
    assert (tmp_path / "resumed" / "rates.parquet").read_bytes() == (tmp_path / "whole" / "rates.parquet").read_bytes()
    assert not any((tmp_path / "resumed" / STATE).iterdir())
    rates = pd.read_parquet(tmp_path / "whole" / "rates.parquet")
    assert list(rates["id"]) == sorted(items["id"][:4]) + sorted(items["id"][4:8]) + sorted(items["id"][8:])
    assert all(rate * 4 == int(rate * 4) for rate in rates["solve_rate"])
    kill, measured[:] = True, []
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "changed" / "rates.parquet")
    kill, measured[:] = False, []
    run(tmp_path / "changed" / "rates.parquet", {**job["sampling"], "temperature": 0.7})  # another key: nothing reused
    assert [len(ids) for ids in measured] == [4, 4, 2]
    assert not any((tmp_path / "changed" / STATE).iterdir())  # the stale parts went too


@pytest.mark.parametrize("size, of, expected", [
    (4, 3, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]),
    (4, 4, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9], []]),  # the dry run's bound was above the corpus: the last is empty
    (4, 2, [[0, 1, 2, 3], [4, 5, 6, 7, 8, 9]]),  # below it (never, as a bound): the last takes every row left
    (None, 1, [list(range(10))]),
])
def test_each_solve_rate_job_measures_its_chunk_of_the_corpus(size, of, expected):
    from dataflex_rl.study.jobs import chunk_rows

    rows = pd.DataFrame({"id": list(range(10))})
    assert [list(chunk_rows(rows, {"index": i, "of": of, "size": size})["id"]) for i in range(of)] == expected


def _solve_rate_job(tiny, tmp_path):
    from dataflex_rl.artefacts.provenance import write_provenance
    from dataflex_rl.backends.embedded.backend import EmbeddedBackend

    root, corpus = tiny
    corpus.head(10).to_parquet(tmp_path / "corpus.parquet")
    write_provenance(root / "base" / "provenance.json", {"model": "tiny"}, [root / "base"])
    return {"model": EmbeddedBackend().model_settings({}), "template": TEMPLATE,
            "sampling": {"rollouts": 4, "temperature": 1.0, "max_new_tokens": 8}}, root / "base"


def test_the_solve_rate_table_of_chunk_jobs_is_the_one_jobs_byte_for_byte(tiny, tmp_path, monkeypatch):
    """Chunks of 8 prompts in parts of 4 (as verl measures them, each part's draws seeded as one pass's) give, put
    together by the table job, the file one job measuring the corpus in parts of 4 writes; on the embedded backend's
    one chunk the table is that job's file as it is: what the rule solve_rates wrote before it had chunks."""
    from dataflex_rl.backends.embedded.backend import EmbeddedBackend
    from dataflex_rl.study import jobs

    job, base = _solve_rate_job(tiny, tmp_path)
    corpus = tmp_path / "corpus.parquet"
    monkeypatch.setattr(EmbeddedBackend, "solve_rate_part", 4)
    jobs.measure_base_solve_rates(job, WHOLE_CORPUS, base=base, corpus=corpus, out=tmp_path / "one.parquet")
    chunks = [tmp_path / "chunks" / f"chunk{i}.parquet" for i in range(3)]
    for index, chunk in enumerate(chunks):  # 10 prompts, chunks of 8 as the dry run would cut a bound of 17
        jobs.measure_base_solve_rates(job, {"index": index, "of": 3, "size": 8}, base=base, corpus=corpus, out=chunk)
    assert len(pd.read_parquet(chunks[2])) == 0  # no prompt left for it
    jobs.solve_rate_table(chunks, base=base, corpus=corpus, out=tmp_path / "table.parquet")
    assert (tmp_path / "table.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()
    jobs.solve_rate_table([tmp_path / "one.parquet"], base=base, corpus=corpus, out=tmp_path / "as_is.parquet")
    assert (tmp_path / "as_is.parquet").read_bytes() == (tmp_path / "one.parquet").read_bytes()


def test_the_solve_rate_table_refuses_chunks_that_do_not_add_up(tiny, tmp_path):
    from dataflex_rl.study import jobs

    job, base = _solve_rate_job(tiny, tmp_path)
    corpus = tmp_path / "corpus.parquet"
    chunks = [tmp_path / f"chunk{i}.parquet" for i in range(2)]
    for index, chunk in enumerate(chunks):
        jobs.measure_base_solve_rates(job, {"index": index, "of": 2, "size": 5}, base=base, corpus=corpus, out=chunk)
    with pytest.raises(ValueError, match=r"chunk0.parquet: prompts \[.*\] are in an earlier chunk too"):
        jobs.solve_rate_table([chunks[0], chunks[0]], base=base, corpus=corpus, out=tmp_path / "table.parquet")
    with pytest.raises(ValueError, match=r"table.parquet: no chunk measured 5 prompt\(s\) of .*corpus.parquet"):
        jobs.solve_rate_table(chunks[:1], base=base, corpus=corpus, out=tmp_path / "table.parquet")
    pd.read_parquet(corpus).head(9).to_parquet(corpus)  # the corpus changed after the chunks were measured
    with pytest.raises(ValueError, match=r"chunk0.parquet: measured from other inputs than .*corpus.parquet"):
        jobs.solve_rate_table(chunks, base=base, corpus=corpus, out=tmp_path / "table.parquet")
    assert not (tmp_path / "table.parquet").exists()
