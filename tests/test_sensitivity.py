"""Evaluation sensitivity, seed sufficiency and detectable effects: by hand, and on the authors' released records."""
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dataflex_rl.stats.paired import UnmatchedSeedsError
from dataflex_rl.stats.power import minimum_detectable_effect, paired_t_power
from dataflex_rl.stats.seeds import detectable_effects, seed_matrix, seed_sufficiency
from dataflex_rl.stats.sensitivity import evaluation_sensitivity, method_means, summary_spearman_matrix
from dataflex_rl.stats.simulate import simulate_records
from dataflex_rl.stats.summaries import run_summaries, summary_columns

RELEASED = Path(__file__).resolve().parents[2] / "shared/data/dataflex-rl-records/all_runs_171.csv"
needs_release = pytest.mark.skipif(not RELEASED.is_file(), reason=f"{RELEASED} not present")


def _summaries(values: dict[str, list[tuple[float, float]]]) -> pd.DataFrame:
    """method → per-seed (DB, Macro) values, seeds 1, 2, …; plus an untrained row that must be ignored."""
    rows = [{"model": "m", "method": "untrained", "seed": pd.NA, "DB-12": 0.99, "Macro-12": 0.0}]
    for method, per_seed in values.items():
        rows += [{"model": "m", "method": method, "seed": s, "DB-12": db, "Macro-12": macro}
                 for s, (db, macro) in enumerate(per_seed, start=1)]
    return pd.DataFrame(rows).astype({"seed": "Int64"})


def test_sensitivity_by_hand():
    summaries = _summaries({"a": [(0.50, 0.40), (0.52, 0.42)], "b": [(0.40, 0.60), (0.42, 0.60)],
                            "c": [(0.30, 0.50), (0.30, 0.52)]})
    table = evaluation_sensitivity(summaries, ["DB-12", "Macro-12"]).set_index("metric")
    assert table.loc["DB-12", "ranking"] == "a > b > c" and table.loc["Macro-12", "ranking"] == "b > c > a"
    assert table.loc["DB-12", "spread"] == pytest.approx(100 * (0.51 - 0.30))
    assert table.loc["Macro-12", "spread"] == pytest.approx(100 * (0.60 - 0.41))
    # ranks DB (3, 2, 1) vs Macro (1, 3, 2): ρ = 1 − 6·Σd²/(n(n²−1)) = 1 − 6·(4+1+1)/24 = −0.5
    assert table.loc["Macro-12", "spearman_vs_DB-12"] == pytest.approx(-0.5)
    assert table.loc["DB-12", "spearman_vs_DB-12"] == 1.0
    assert table["n_methods"].tolist() == [3, 3]  # the untrained base is not ranked
    matrix = summary_spearman_matrix(summaries, "m", ["DB-12", "Macro-12"])
    assert matrix.loc["DB-12", "Macro-12"] == matrix.loc["Macro-12", "DB-12"] == pytest.approx(-0.5)


def test_seed_sufficiency_by_hand():
    # Seeds 1, 2 favour a; seed 3 favours b strongly; all-seed winner is b.
    summaries = _summaries({"a": [(0.6, 0), (0.6, 0), (0.1, 0)], "b": [(0.5, 0), (0.5, 0), (0.9, 0)]})
    table = seed_sufficiency(summaries, "DB-12").set_index("n_seeds")
    assert table.loc[3, "winner"] == "b" and table.loc[3, "winner_agreement"] == 1.0
    # 2-seed subsets {1,2}: a wins; {1,3}, {2,3}: b wins → 2/3 agree; ρ is −1, +1, +1.
    assert table.loc[2, "subsets"] == 3 and table.loc[2, "winner_agreement"] == pytest.approx(2 / 3)
    assert table.loc[2, "mean_spearman"] == pytest.approx(1 / 3)


def test_seed_sufficiency_caps_subsets_and_matches_a_direct_computation():
    records = simulate_records(["m"], ["baseline", "x", "y", "z"], list(range(1, 13)), untrained=False, items=50,
                               benchmarks=["MATH-500", "BBH-logical-deduction", "GPQA-Diamond"], rng=3)
    summaries = run_summaries(records)
    table = seed_sufficiency(summaries, "DB-3", max_subsets=200).set_index("n_seeds")
    assert table.loc[6, "subsets"] == 200 and table.loc[2, "subsets"] == math.comb(12, 2) == 66
    matrix = seed_matrix(summaries, "m", "DB-3")
    full = matrix.mean(axis=1).to_numpy()
    rhos, wins = [], []
    for subset in itertools.combinations(matrix.columns, 2):
        means = matrix[list(subset)].mean(axis=1).to_numpy()
        rhos.append(stats.spearmanr(means, full).statistic)
        wins.append(means.argmax() == full.argmax())
    assert table.loc[2, "mean_spearman"] == pytest.approx(np.mean(rhos), abs=1e-12)
    assert table.loc[2, "winner_agreement"] == pytest.approx(np.mean(wins), abs=1e-12)


def _direct_seed_sufficiency(summaries: pd.DataFrame, metric: str, cap: int, rng: int) -> dict:
    """The protocol spelled out one subset at a time: per model in order, sizes 2 … S, all subsets or `cap` distinct
    random ones from one generator seeded `rng`; (winner agreement, mean ρ) per (model, n)."""
    generator, out = np.random.default_rng(rng), {}
    for model in pd.unique(summaries["model"]):
        values = seed_matrix(summaries, model, metric).to_numpy()
        full, count = values.mean(axis=1), values.shape[1]
        for n in range(2, count + 1):
            if math.comb(count, n) <= cap:
                subsets = list(itertools.combinations(range(count), n))
            else:
                chosen = set()
                while len(chosen) < cap:
                    chosen.add(tuple(sorted(generator.choice(count, size=n, replace=False).tolist())))
                subsets = sorted(chosen)
            means = [values[:, list(s)].mean(axis=1) for s in subsets]
            out[(model, n)] = (np.mean([m.argmax() == full.argmax() for m in means]),
                               np.mean([stats.spearmanr(m, full).statistic for m in means]))
    return out


@pytest.mark.parametrize("seeds, cap", [({"m": 12}, 200), ({"a": 9, "b": 11}, 40)])
def test_seed_sufficiency_random_subsets_match_one_subset_at_a_time(seeds, cap):
    # Capped sizes draw random subsets, model after model from one generator: the vectorised table must be the one the
    # subset-by-subset computation gives on the same draws (and the second model's draws continue the first's).
    records = simulate_records(list(seeds), ["baseline", "x", "y", "z", "w"], list(range(1, 13)), untrained=False,
                               items=50, benchmarks=["MATH-500", "BBH-logical-deduction", "GPQA-Diamond"], rng=4)
    summaries = run_summaries(records)
    summaries = summaries[summaries["seed"] <= summaries["model"].map(seeds)]
    table = seed_sufficiency(summaries, "DB-3", max_subsets=cap, rng=9)
    direct = _direct_seed_sufficiency(summaries, "DB-3", cap, rng=9)
    assert len(table) == len(direct) == sum(count - 1 for count in seeds.values())
    for row in table.itertuples():
        agreement, rho = direct[(row.model, row.n_seeds)]
        assert row.subsets == min(cap, math.comb(row.of_seeds, row.n_seeds))
        assert row.winner_agreement == agreement
        assert row.mean_spearman == pytest.approx(rho, abs=1e-12)


def test_seed_matrix_names_unmatched_cells():
    summaries = _summaries({"a": [(0.5, 0), (0.5, 0)], "b": [(0.4, 0), (0.4, 0)]})
    summaries = summaries[~((summaries["method"] == "b") & (summaries["seed"] == 2))]
    with pytest.raises(UnmatchedSeedsError, match=r"\(b, seed 2\)"):
        seed_matrix(summaries, "m", "DB-12")


def test_minimum_detectable_effect_has_the_asked_power():
    for n in (3, 6, 12):
        mde = minimum_detectable_effect(sd=1.5, n=n)
        assert paired_t_power(mde, 1.5, n) == pytest.approx(0.8, abs=1e-9)
    assert paired_t_power(0.0, 1.0, 10) == pytest.approx(0.05, abs=1e-12)
    # Large n: close to the normal approximation (z_.975 + z_.8)·sd/√n.
    normal = (1.959964 + 0.841621) * 2 / 20
    assert normal < minimum_detectable_effect(2.0, 400) < normal * 1.005  # t needs slightly more than z
    assert math.isnan(minimum_detectable_effect(1.0, 1)) and math.isnan(minimum_detectable_effect(0.0, 5))
    # More seeds, smaller detectable effect; 3 seeds need roughly 3.3 SDs.
    table = detectable_effects(pd.DataFrame([{"model": "m", "method": "x", "control": "baseline", "metric": "DB-12",
                                              "n_seeds": 3, "sd": 1.0, "delta_mean": 0.5}]))
    row = table.iloc[0]
    assert row["mde"] == row["mde_3_seeds"] > row["mde_6_seeds"] > row["mde_12_seeds"]
    assert 3.0 < row["mde"] < 3.5 and not row["detectable"]


@needs_release
def test_released_seven_b_main_sensitivity():
    from dataflex_rl.records.imported import import_released_runs

    summaries = run_summaries(import_released_runs(RELEASED))
    main = summaries[summaries["model"] == "Qwen2.5-7B-Instruct@main"]
    assert summary_columns(main) == ["DB-12", "Macro-12", "Item-12", "Math-Heavy-6"]
    table = evaluation_sensitivity(main).set_index("metric")
    assert table["spearman_vs_DB-12"].round(4).to_dict() == {
        "DB-12": 1.0, "Macro-12": 0.8833, "Item-12": 0.8833, "Math-Heavy-6": -0.3333}
    assert table["spread"].round(2).to_dict() == {"DB-12": 3.31, "Macro-12": 2.79, "Item-12": 2.17,
                                                  "Math-Heavy-6": 0.90}
    assert table.loc["DB-12", "winner"] == "gfpo" and table.loc["Math-Heavy-6", "winner"] == "topk"
    means = method_means(main).set_index("method")
    assert means.loc["baseline", "Math-Heavy-6"] == pytest.approx(50.720, abs=1e-3)
