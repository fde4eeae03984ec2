"""The equivalence summary (docs/statistics.md: the paper's question): verdict counts per method family on hand-built
cases, and the smallest all-equivalent margin against brute force — statsmodels' ttost_paired / ttost_ind and Holm by
multipletests over a margin grid and either side of each margin — and against compare_methods' own verdicts just above and below it."""
import gc

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from dataflex_rl.policies.catalogue import CATALOGUE
from dataflex_rl.records.imported import import_released_runs
from dataflex_rl.stats.equivalence_summary import equivalence_summary
from dataflex_rl.stats.paired import compare_methods
from dataflex_rl.stats.summaries import run_summaries
from test_equivalence import ARMS, CONTROLS, RELEASED, _printed_db12, _summaries, needs_release

ALPHA = 0.05
FAMILIES = {"up": "selection", "down": "selection", "flat": "reweighting", "nudge": "reweighting", "noisy": "mixture"}


@pytest.fixture(autouse=True)
def _holm_without_a_full_collection(monkeypatch):
    """statsmodels' Holm branch of multipletests ends with gc.collect(), a full collection of the test process's heap at
    each of the brute force's ~70 calls: 24 s a test in the whole suite. The p-values do not depend on it."""
    monkeypatch.setattr(gc, "collect", lambda *args: 0)


def _summary(summaries, controls, families, margin=1.0, pairing="paired"):
    compared = compare_methods(summaries, controls=controls, pairing=pairing, equivalence_margin=margin, spread=True)
    return equivalence_summary(compared, families, ALPHA).set_index("family")


def _holm_tost(pairs, margins, pairing="paired"):
    """[margin, comparison]: Holm-adjusted TOST p-values by statsmodels, at each margin (points)."""
    def p_tost(treated, control, m):
        if pairing == "paired":
            return ttost_paired(treated, control, -m / 100, m / 100)[0]
        return ttost_ind(treated, control, -m / 100, m / 100, usevar="unequal")[0]

    return np.array([multipletests([p_tost(t, c, m) for t, c in pairs], method="holm")[1] for m in margins])


def _check_against_brute_force(summaries, controls, families, pairs, pairing="paired"):
    """Every family's margin: all-equivalent by statsmodels exactly above it — on a grid up to twice the largest (that
    hits none of them) and a relative 1e-6 either side of each; compare_methods' verdicts all "equivalent" just above
    it and not all just below."""
    table = _summary(summaries, controls, families, pairing=pairing)
    methods = list(controls)
    margins = table["all_equivalent_margin"].dropna().to_numpy()
    grid = np.concatenate([margins.max() * np.linspace(0.0011, 2, 60), margins * (1 - 1e-6), margins * (1 + 1e-6)])
    adjusted = _holm_tost(pairs, grid, pairing)
    for family, row in table.iterrows():
        margin, members = row["all_equivalent_margin"], row["methods"].split(", ")
        everyone = (adjusted[:, [methods.index(m) for m in members]] < ALPHA).all(axis=1)
        assert (everyone == (grid > margin)).all(), family
        for scale, expected in ((1 + 1e-7, True), (1 - 1e-7, False)):
            verdicts = compare_methods(summaries, controls=controls, pairing=pairing,
                                       equivalence_margin=margin * scale).set_index("method")["verdict"]
            assert (verdicts[members] == "equivalent").all() == expected, (family, scale)
    return table


def test_counts_per_family_at_the_configured_margin():
    table = _summary(_summaries(), CONTROLS, FAMILIES)
    assert list(table.index) == ["selection", "reweighting", "mixture"]
    counts = table[["better", "worse", "equivalent", "inconclusive"]].to_dict("index")
    assert counts == {"selection": {"better": 1, "worse": 1, "equivalent": 0, "inconclusive": 0},
                      "reweighting": {"better": 0, "worse": 0, "equivalent": 2, "inconclusive": 0},
                      "mixture": {"better": 0, "worse": 0, "equivalent": 0, "inconclusive": 1}}
    assert table["methods"].to_dict() == {"selection": "up, down", "reweighting": "flat, nudge", "mixture": "noisy"}
    assert set(table["margin"]) == {1.0} and set(table["metric"]) == {"DB-12"}
    # already all equivalent at 1 point: their margin lies below it
    assert table.loc["reweighting", "all_equivalent_margin"] < 1.0 < table.loc["selection", "all_equivalent_margin"]


def test_better_and_worse_methods_get_a_margin_too():
    """verdicts() puts "equivalent" first, so a wide enough margin makes a better or worse method equivalent."""
    control = np.array(ARMS["baseline"])
    pairs = [(np.array(ARMS[m]), control) for m in CONTROLS]
    table = _check_against_brute_force(_summaries(), CONTROLS, FAMILIES, pairs)
    assert 3 < table.loc["selection", "all_equivalent_margin"] < 5  # Δ ±3 points with little spread


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("pairing", ["paired", "unpaired"])
def test_margin_equals_brute_force_on_random_studies(seed, pairing):
    """Seven methods in three families, Holm over all seven: a family's margin depends on the other families' methods
    (Holm's thresholds step down over the whole table), and p-values cross as the margin grows."""
    rng = np.random.default_rng(seed)
    n = 3 if pairing == "paired" else 5
    arms = {"baseline": 0.4 + rng.normal(0, 0.01, n)}
    families = {}
    for i, family in enumerate(["selection"] * 3 + ["reweighting"] * 2 + ["mixture"] * 2):
        size = n if pairing == "paired" else int(rng.integers(3, 6))
        arms[f"m{i}"] = arms["baseline"][:size] + rng.normal(rng.normal(0, 0.01), rng.uniform(0.001, 0.02), size)
        families[f"m{i}"] = family
    controls = {m: "baseline" for m in families}
    pairs = [(np.array(arms[m]), np.array(arms["baseline"])) for m in controls]
    table = _check_against_brute_force(_summaries(arms), controls, families, pairs, pairing)
    assert table["all_equivalent_margin"].notna().all()


def test_one_method_needs_the_far_end_of_its_tost_interval():
    controls = {"noisy": "baseline"}
    compared = compare_methods(_summaries(), controls=controls, spread=True).iloc[0]
    margin = _summary(_summaries(), controls, FAMILIES).loc["mixture", "all_equivalent_margin"]
    assert margin == pytest.approx(max(abs(compared["tost_low"]), abs(compared["tost_high"])), rel=1e-12)


def test_no_spread_margin_is_the_largest_difference():
    base = [0.5, 0.25]
    arms = {"baseline": base, "up": [v + 0.03125 for v in base], "down": [v - 0.0625 for v in base],
            "flat": [v + 0.00390625 for v in base], "nudge": base, "noisy": [0.5, 0.3]}
    table = _summary(_summaries(arms), CONTROLS, FAMILIES)
    assert table.loc["selection", "all_equivalent_margin"] == 6.25
    assert table.loc["reweighting", "all_equivalent_margin"] == 0.390625


def test_a_member_with_one_seed_has_no_margin_and_others_are_not_held_by_it():
    """Holm's M counts the comparisons with a TOST p-value, so a one-seed method counts for nobody."""
    arms = {**ARMS, "noisy": ARMS["noisy"][:1]}
    table = _summary(_summaries(arms), CONTROLS, FAMILIES, pairing="shared_seeds")
    assert np.isnan(table.loc["mixture", "all_equivalent_margin"]) and table.loc["mixture", "inconclusive"] == 1
    without = {m: c for m, c in CONTROLS.items() if m != "noisy"}
    alone = _summary(_summaries(arms), without, FAMILIES, pairing="shared_seeds")
    assert table.loc[["selection", "reweighting"], "all_equivalent_margin"].tolist() == \
        alone.loc[["selection", "reweighting"], "all_equivalent_margin"].tolist()


def test_a_method_without_a_family_is_refused():
    with pytest.raises(ValueError, match=r"no method family for \['noisy'\]"):
        _summary(_summaries(), CONTROLS, {m: f for m, f in FAMILIES.items() if m != "noisy"})


@needs_release
@pytest.mark.parametrize(("cell", "campaign", "methods", "counts"), [
    # difffilter within a point of uniform GRPO on the 7B base (test_equivalence), maxvar and topk inconclusive
    ("Qwen2.5-7B-base", "crossfamily", ["difffilter", "maxvar", "topk"], {"selection": (0, 0, 1, 2)}),
    # two families in one Holm family of eight: Holm's step-down makes them all equivalent at one margin
    ("Qwen2.5-0.5B-Instruct", "main", ["ar", "per", "softmax", "difffilter", "diffband", "maxvar", "gfpo", "topk"],
     {"reweighting": (0, 0, 0, 4), "selection": (0, 0, 0, 4)}),
])
def test_released_cell_against_brute_force(cell, campaign, methods, counts):
    summaries = run_summaries(import_released_runs(RELEASED))
    summaries = summaries[summaries["model"] == f"{cell}@{campaign}"]
    printed = _printed_db12(cell, campaign) / 100
    controls = {m: "baseline" for m in methods}
    families = {m: str(CATALOGUE[m].family) for m in methods}
    pairs = [(printed[m].to_numpy(), printed["baseline"].to_numpy()) for m in methods]
    table = _check_against_brute_force(summaries, controls, families, pairs)
    assert {f: tuple(row) for f, row in table[["better", "worse", "equivalent", "inconclusive"]].iterrows()} == counts
    assert (table["all_equivalent_margin"] > 1.0).all()
