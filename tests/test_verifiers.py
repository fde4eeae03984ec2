"""Verifiers against known answers in every format, and the calibration gate."""
import dataclasses

import pandas as pd
import pytest

from dataflex_rl.item_sources.registry import EMBEDDED_BENCHMARKS, REGISTRY
from dataflex_rl.formats import FORMATS
from dataflex_rl.formats.base import Verdict
from dataflex_rl.formats.exact import verify_exact
from dataflex_rl.formats.knights_knaves import verify_knights_knaves
from dataflex_rl.formats.math import verify_math
from dataflex_rl.formats.multiple_choice import verify_multiple_choice
from dataflex_rl.formats.procedural import verify_procedural
from dataflex_rl.corpus.build import benchmark_items
from dataflex_rl.verify.calibration import CalibrationError, calibrate_benchmark


def _procedural_item(name="basic_arithmetic"):
    return benchmark_items(name, n_items=5, seed=11).iloc[0].to_dict()


def test_procedural_reward_is_one_only_at_full_credit():
    item = _procedural_item()
    gold = item["answer"]
    assert verify_procedural(gold, item) == Verdict(parsed=True, correct=True)
    assert verify_procedural(f"Answer: {gold}\nbecause", item).correct
    # reasoning-gym gives partial credit (e.g. 1/3 for "2.0" when the gold is "2"); the reward counts full credit only
    assert not verify_procedural(f"{gold}.0", item).correct
    assert not verify_procedural(str(int(gold) + 1), item).correct
    assert verify_procedural("   ", item) == Verdict(parsed=False, correct=False)


@pytest.mark.parametrize("response", ["B", "(B)", "B) 3500", "B.", "The answer is (B).", "Answer: B",
                                      "the answer is b"])
def test_multiple_choice_accepts_the_usual_surface_forms(response):
    assert verify_multiple_choice(response, {"answer": "B"}) == Verdict(parsed=True, correct=True)


@pytest.mark.parametrize("response,parsed", [("C", True), ("(A)", True), ("Because it is", False), ("", False)])
def test_multiple_choice_rejects_wrong_or_missing_letters(response, parsed):
    assert verify_multiple_choice(response, {"answer": "B"}) == Verdict(parsed=parsed, correct=False)


@pytest.mark.parametrize("response", [r"\boxed{\frac{1}{2}}", "0.5", r"The answer is $\frac12$.", r"\boxed{0.5}"])
def test_math_verify_equivalence(response):
    assert verify_math(response, {"answer": r"\frac{1}{2}"}).correct


def test_math_wrong_and_unparsed():
    assert verify_math(r"\boxed{3}", {"answer": r"\frac{1}{2}"}) == Verdict(parsed=True, correct=False)
    assert verify_math("", {"answer": "2"}) == Verdict(parsed=False, correct=False)


def test_exact_and_knights_knaves():
    assert verify_exact("(B)", {"answer": "(B)"}).correct
    assert verify_exact("  valid. ", {"answer": "Valid"}).correct
    assert not verify_exact("invalid", {"answer": "valid"}).correct
    gold = {"answer": "Zoey is a knight, and Oliver is a knave."}
    assert verify_knights_knaves("Oliver is a knave and Zoey is a knight", gold).correct
    assert not verify_knights_knaves("Oliver is a knight and Zoey is a knight", gold).correct
    assert verify_knights_knaves("no idea", gold) == Verdict(parsed=False, correct=False)


def test_every_benchmark_is_scored_by_a_registered_format():
    assert {benchmark.answer_format for benchmark in REGISTRY.values()} <= set(FORMATS)


@pytest.mark.parametrize("name", sorted(EMBEDDED_BENCHMARKS))
def test_every_embedded_benchmark_passes_calibration(name):
    report = calibrate_benchmark(name, benchmark_items(name, n_items=30, seed=1000))
    assert report["failures"] == 0 and report["gold_checked"] >= 60 and report["corrupted_checked"] >= 60


def test_calibration_stops_on_a_verifier_that_accepts_everything(monkeypatch):
    accepting = dataclasses.replace(FORMATS["multiple_choice"], verify=lambda response, item: Verdict(True, True))
    monkeypatch.setitem(FORMATS, "multiple_choice", accepting)
    with pytest.raises(CalibrationError, match="benchmark 'kinematics' .*multiple_choice.*scored 1"):
        calibrate_benchmark("kinematics", benchmark_items("kinematics", n_items=10, seed=1000))


def test_calibration_stops_on_a_format_mismatch():
    items = benchmark_items("basic_arithmetic", n_items=10, seed=1000).assign(answer_format="multiple_choice")
    with pytest.raises(CalibrationError, match="benchmark 'basic_arithmetic'.*gold .* scored 0"):
        calibrate_benchmark("basic_arithmetic", items)


def test_calibration_refuses_an_empty_benchmark():
    with pytest.raises(CalibrationError, match="no items"):
        calibrate_benchmark("gcd", pd.DataFrame(columns=["id", "answer", "answer_format"]))


# Golds as the real files write them, and answers a model writes; each verdict worked out by hand.
@pytest.mark.parametrize("response, gold, correct", [
    ("\\boxed{36}", "\\$36", True), ("\\boxed{32348}", "\\$32,\\!348", True), ("The answer is $\\$7.50$.", "7.5", True),
    ("\\boxed{37}", "\\$36", False),
    ("\\boxed{4.5 \\times 10^{33}}", "4.5e33", True), ("\\boxed{0.002}", "2e-3", True),
    ("\\boxed{4.5e33}", "4.5 \\times 10^{33}", True), ("\\boxed{1.13 \\times 10^{2}}", "113", True),
    ("\\boxed{4.5 \\times 10^{32}}", "4.5e33", False), ("\\boxed{4.5 e 33}", "4.5e33", False),
    ("\\boxed{-\\frac{1}{3}}", "-1./3", True), ("\\boxed{-0.5}", "-1./2", True), ("\\boxed{-1}", "-1./3", False),
    ("\\boxed{\\text{0.25}}", ".25", True), ("\\boxed{1.6 \\text{ cm}}", "1.6", True),
    ("\\boxed{N=n}", "N=n", True), ("\\boxed{N=n+1}", "N=n", False),  # math-verify reads both as booleans
])
def test_math_golds_written_as_the_real_files_write_them(response, gold, correct):
    assert verify_math(response, {"answer": gold}) == Verdict(parsed=True, correct=correct)


SETS = {"answer": "69, 84", "metadata": {"answers": ["69", "84"]}}
TUPLES = {"answer": "(-6,6), (2,6)", "metadata": {"answers": ["(-6,6)", "(2,6)"]}}
TUPLES_IN_ONE = {"answer": "(1,0),(0,1), 2", "metadata": {"answers": ["(1,0),(0,1)", "2"]}}


@pytest.mark.parametrize("response, item, correct", [
    ("\\boxed{84, 69}", SETS, True), ("The answers are $69$ and $84$.", SETS, True), ("\\boxed{69}", SETS, False),
    ("\\boxed{69, 84, 1}", SETS, False), ("\\boxed{69, 69}", SETS, False),
    ("\\boxed{(2,6), (-6,6)}", TUPLES, True), ("\\boxed{(2,6)}", TUPLES, False),
    ("\\boxed{-6, 6, 2, 6}", TUPLES, False),
    ("\\boxed{2, (0,1), (1,0)}", TUPLES_IN_ONE, True), ("\\boxed{(1,0), 2}", TUPLES_IN_ONE, False),
])
def test_a_gold_of_several_answers_needs_every_one_in_any_order(response, item, correct):
    assert verify_math(response, item) == Verdict(parsed=True, correct=correct)


STAR = {"answer": "A", "metadata": {"options": ["2.5 * 10^-23 kg", "5.0 * 10^-23 kg", "1 kg", "0 kg"]}}
SPANS = {"answer": "A", "metadata": {"options": ["$-1.5$$\\text{kJ}$", "$1.5$$\\text{kJ}$", "$0$", "$3$"]}}
LONE = {"answer": "B", "metadata": {"options": ["b", "c", "a", "none of them"]}}
ROMAN = {"answer": "B", "metadata": {"options": ["I only", "I & II only", "II only", "III only"]}}


@pytest.mark.parametrize("response, item, correct", [
    ("The answer is 2.5 * 10^-23 kg.", STAR, True), ("**2.5 * 10^-23 kg**", STAR, True),
    ("2.5 * 10^-23 kg", STAR, True), ("The answer is 5.0 * 10^-23 kg.", STAR, False),
    ("The answer is $-1.5$$\\text{kJ}$.", SPANS, True), ("The answer is $-1.5$ $\\text{kJ}$.", SPANS, True),
    ("The answer is -1.5 kJ.", SPANS, True), ("The answer is $1.5$$\\text{kJ}$.", SPANS, False),
    ("c", LONE, True), ("The answer is c.", LONE, True), ("C", LONE, False), ("b", LONE, False),
    ("The answer is I & II only.", ROMAN, True), ("I & II only", ROMAN, True), ("The answer is I only.", ROMAN, False),
])
def test_the_correct_option_text_in_any_realistic_form_names_its_option(response, item, correct):
    assert verify_multiple_choice(response, item) == Verdict(parsed=True, correct=correct)
