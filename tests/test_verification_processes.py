"""Verification in processes (dataflex_rl/verify/processes.py) as a solve-rate or score job runs it
(evaluate.scoring.score_items with the job's CPUs as `workers`): from POOL_MIN_CALLS answers on, the verdicts come
from spawned processes, the same values in the same order as one process gives them; below, no pool starts."""
import time

import pandas as pd
import pytest

from dataflex_rl.backends.base import Answer
from dataflex_rl.corpus.build import benchmark_items
from dataflex_rl.evaluate.scoring import score_items
from dataflex_rl.verify import processes

DOMAINS = ("basic_arithmetic", "gcd", "syllogism", "letter_counting", "kinematics")


class _Variants:
    """A Generator (dataflex_rl.backends.base) whose k-th sample of an item is the k-th of: the gold answer, the
    gold boxed, a wrong number, no answer at all; so that the verdicts mix right, wrong and unparsed."""

    def __init__(self, items: pd.DataFrame):
        self.tokenizer, self.golds = None, [str(gold) for gold in items["answer"]]

    def generate(self, prompts, *, samples, **_):
        variants = [lambda gold: gold, lambda gold: f"so the answer is \\boxed{{{gold}}}", lambda gold: "-7.25",
                    lambda gold: "I cannot tell."]
        return [Answer(variants[k % len(variants)](gold), 3) for k in range(samples) for gold in self.golds]


@pytest.fixture(scope="module")
def items():
    return pd.concat([benchmark_items(name, n_items=220, seed=3) for name in DOMAINS], ignore_index=True)


def test_the_verdicts_of_a_large_answer_set_in_processes_are_the_serial_ones(items):
    generator = _Variants(items)
    assert len(items) * 4 >= processes.POOL_MIN_CALLS  # the pool's own threshold, not a lowered one
    began = time.monotonic()
    serial = score_items(generator, items, "{question}", max_new_tokens=4, samples=4)
    serial_s, began = time.monotonic() - began, time.monotonic()
    pooled = score_items(generator, items, "{question}", max_new_tokens=4, samples=4, workers=2)
    print(f"{len(serial)} verdicts: serial {serial_s:.2f} s, 2 processes {time.monotonic() - began:.2f} s")
    pd.testing.assert_frame_equal(pooled, serial)
    assert serial["correct"].any() and not serial["correct"].all() and not serial["parsed"].all()


def test_below_the_threshold_no_pool_starts(items, monkeypatch):
    def refused(*_, **__):
        raise AssertionError("a pool started for a small answer set")

    monkeypatch.setattr(processes, "ProcessPoolExecutor", refused)
    small = items.head(100)
    scored = score_items(_Variants(small), small, "{question}", max_new_tokens=4, samples=4, workers=8)
    assert len(scored) == 400


def test_in_processes_keeps_the_calls_order():
    calls = list(range(50))
    assert processes.in_processes(abs, [-c for c in calls], workers=2, minimum=10) == calls
