"""Clean-vs-full scores, the leaked-vs-clean gap test and difference-in-differences: by hand, against scipy, and
calibrated by simulation (the null rates measured with these seeds are stated in each test)."""
from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy.stats import fisher_exact

from scoring.impact.stats import clean_vs_full, difference_in_differences, gap_test, mean_ci
from scoring.stats.proportions import bootstrap_mean_ci, wilson_ci


def test_binary_means_get_the_wilson_interval():
    got = mean_ci([1, 0, 1, 1, math.nan], level=0.9)
    assert got["method"] == "wilson" and got["mean"] == 0.75 and (got["n"], got["n_dropped"]) == (4, 1)
    assert got["ci"] == pytest.approx(list(wilson_ci(3, 4, alpha=0.1)))


def test_real_scores_get_a_bootstrap_of_the_mean():
    s = [0.2, 0.9, 0.4, 0.7, 0.5]
    got = mean_ci(s, n_boot=500, seed=4)
    assert got["method"] == "bootstrap" and got["mean"] == pytest.approx(0.54)
    assert got["ci"] == pytest.approx(list(bootstrap_mean_ci(s, n=500, seed=4)))


def test_no_scores_no_mean():
    assert mean_ci([math.nan]) == {"mean": None, "ci": None, "n": 0, "n_dropped": 1, "method": None}


def test_clean_vs_full_by_hand():
    scores = np.array([1, 1, 1, 0, 1, 0], dtype=float)
    clean = np.array([False, False, True, True, True, True])
    got = clean_vs_full(scores, clean, n_boot=300, seed=1)
    assert got["full_score"] == pytest.approx(4 / 6) and got["clean_score"] == pytest.approx(0.5)
    assert got["diff"] == pytest.approx(1 / 6) and got["relative_change"] == pytest.approx(1 / 3)
    assert got["clean_ci"] == pytest.approx(list(wilson_ci(2, 4))) and got["clean_method"] == "wilson"
    # the diff's bootstrap: all items resampled, both scores recomputed on the same resample
    idx = np.random.default_rng(1).integers(0, 6, size=(300, 6))
    s, c = scores[idx], clean[idx]
    ok = c.sum(1) > 0
    diffs = s[ok].mean(1) - (s * c)[ok].sum(1) / c[ok].sum(1)
    assert got["diff_ci"] == pytest.approx(list(np.quantile(diffs, [0.025, 0.975])))
    assert got["n_degenerate"] == int((~ok).sum())


def test_clean_vs_full_edge_cases():
    got = clean_vs_full([1.0, 0.0, math.nan], [False, False, True])
    assert got["clean_score"] is None and got["diff"] is None and "every scored item is leaked" in got["reason"]
    assert got["full_score"] == 0.5 and got["n_dropped"] == 1
    got = clean_vs_full([1.0, 0.0, 0.0], [False, True, True])
    assert got["clean_score"] == 0.0 and got["relative_change"] is None and got["diff"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="mask of the 3 items"):
        clean_vs_full([1.0, 0.0, 0.0], [True, False])


def binary_groups(right_leaked, n_leaked, right_clean, n_clean):
    scores = [1.0] * right_leaked + [0.0] * (n_leaked - right_leaked) + [1.0] * right_clean + [0.0] * (
        n_clean - right_clean)
    return np.array(scores), np.array([True] * n_leaked + [False] * n_clean)


@pytest.mark.parametrize("counts", [(8, 10, 3, 10), (2, 3, 5, 9), (0, 4, 4, 4), (5, 5, 0, 7)])
def test_the_binary_gap_p_is_fishers_exact_one_sided(counts):
    k_l, n_l, k_c, n_c = counts
    got = gap_test(*binary_groups(*counts), n_boot=100)
    expected = fisher_exact([[k_l, n_l - k_l], [k_c, n_c - k_c]], alternative="greater").pvalue
    assert got["p_method"] == "exact (hypergeometric)" and got["p_value"] == pytest.approx(expected, rel=1e-9)
    assert got["gap"] == pytest.approx(k_l / n_l - k_c / n_c)


def test_strong_evidence_gives_a_p_far_below_a_thousandth():
    got = gap_test(*binary_groups(45, 50, 25, 50), n_boot=100)
    assert got["p_value"] < 1e-4 and got["gap"] == pytest.approx(0.4)
    assert got["gap_ci"][0] > 0.2


def test_the_gap_ci_resamples_within_each_group():
    scores = np.array([0.9, 0.7, 0.8, 0.1, 0.3, 0.2, 0.4])
    leaked = np.array([True, True, True, False, False, False, False])
    got = gap_test(scores, leaked, n_boot=400, permutations=10, seed=7)
    rng = np.random.default_rng(7)
    a = scores[:3][rng.integers(0, 3, size=(400, 3))].mean(1)
    b = scores[3:][rng.integers(0, 4, size=(400, 4))].mean(1)
    assert got["gap_ci"] == pytest.approx(list(np.quantile(a - b, [0.025, 0.975])))


def test_the_permutation_p_matches_full_enumeration():
    scores = np.array([0.1, 0.55, 0.9, 0.3, 0.7, 0.45])
    leaked = np.array([False, True, True, False, True, False])
    observed = scores[leaked].sum()
    exact = np.mean([scores[list(c)].sum() >= observed - 1e-12 for c in combinations(range(6), 3)])  # 2/20
    got = gap_test(scores, leaked, n_boot=50, permutations=20000, seed=2)
    assert got["p_method"] == "permutation" and got["p_value"] == pytest.approx(exact, abs=0.01)


def test_a_shuffle_that_picks_the_observed_items_in_another_order_counts():
    # 0.1 + 0.2 + 0.3 rounds differently by order; the only subset of 3 reaching it is the observed one: p = 1/4
    scores, leaked = np.array([0.1, 0.2, 0.3, 0.0]), np.array([True, True, True, False])
    got = gap_test(scores, leaked, n_boot=10, permutations=20000, seed=0)
    assert got["p_value"] == pytest.approx(0.25, abs=0.015)
    assert gap_test(np.full(6, 0.5), leaked.tolist() + [False, False], permutations=500)["p_value"] == 1.0


def test_gap_edge_cases():
    none = gap_test([1.0, 0.0, 1.0], [False, False, False])
    assert none["gap"] is None and none["p_value"] is None and none["reason"].startswith("no leaked items")
    assert none["mean_clean"] == pytest.approx(2 / 3) and none["n_leaked"] == 0
    everything = gap_test([1.0, 0.0], [True, True])
    assert everything["gap"] is None and everything["reason"].startswith("no clean items")
    got = gap_test([1.0, math.nan, 0.0, 1.0], [True, True, False, False], n_boot=50)
    assert (got["n_leaked"], got["n_clean"], got["n_dropped"]) == (1, 2, 1) and got["gap"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="mask of the 3 items"):
        gap_test([1.0, 0.0, 1.0], [True, False])


def test_the_gap_test_holds_its_level_on_binary_scores():
    """Leaked and clean items drawn from one distribution of item ease (Beta(2, 2)), 200 items of which 40 leaked,
    500 sets: p < 0.05 in 4.6% of them (Fisher's exact test can only be conservative on discrete data). Band:
    1.5–7%."""
    rng = np.random.default_rng(11)
    leaked = np.arange(200) < 40
    ps = [gap_test((rng.random(200) < rng.beta(2, 2, 200)).astype(float), leaked, n_boot=1)["p_value"]
          for _ in range(500)]
    assert 0.015 <= np.mean(np.array(ps) < 0.05) <= 0.07


def test_the_gap_test_holds_its_level_on_real_scores():
    """Skewed real scores (Beta(2, 5)), 120 items of which 30 leaked, 400 sets, 999 shuffles each: p < 0.05 in
    5.0% of them. Band: 2.5–8% (about 2.5 binomial standard errors)."""
    rng = np.random.default_rng(12)
    leaked = np.arange(120) < 30
    ps = [gap_test(rng.beta(2, 5, 120), leaked, n_boot=1, permutations=999, seed=i)["p_value"] for i in range(400)]
    assert 0.025 <= np.mean(np.array(ps) < 0.05) <= 0.08


def test_did_by_hand():
    target = np.array([1.0, 1.0, 0.0, 0.0])
    refs = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    leaked = np.array([True, True, False, False])
    got = difference_in_differences(target, refs, leaked, n_boot=300, seed=5)
    assert got["target_gap"] == 1.0 and got["reference_gaps"] == [0.5, 0.5] and got["reference_gap"] == 0.5
    assert got["did"] == pytest.approx(0.5) and got["n_references"] == 2
    # paired: the same resampled items for every model, i.e. a stratified bootstrap of target − mean(references)
    d = target - refs.mean(0)
    rng = np.random.default_rng(5)
    a = d[:2][rng.integers(0, 2, size=(300, 2))].mean(1)
    b = d[2:][rng.integers(0, 2, size=(300, 2))].mean(1)
    assert got["did_ci"] == pytest.approx(list(np.quantile(a - b, [0.025, 0.975])))


def test_did_edge_cases():
    got = difference_in_differences([1.0, 0.0, math.nan], [0.0, 0.0, 1.0], [True, False, True], n_boot=20)
    assert got["n_dropped"] == 1 and got["did"] == pytest.approx(1.0)  # one reference as a 1-D array
    got = difference_in_differences([1.0, 0.0], [[1.0, 0.0]], [False, False])
    assert got["did"] is None and got["reason"].startswith("no leaked items")
    with pytest.raises(ValueError, match="target has 2 items, references 3"):
        difference_in_differences([1.0, 0.0], [[1.0, 0.0, 1.0]], [True, False])


def test_pairing_cancels_item_difficulty():
    """Items nearly always right or nearly always wrong for every model: each model's gap is noisy, the paired
    difference is not."""
    rng = np.random.default_rng(8)
    ease = np.where(rng.random(200) < 0.5, 0.98, 0.02)
    leaked = np.arange(200) < 50
    models = (rng.random((4, 200)) < ease).astype(float)
    did = difference_in_differences(models[0], models[1:], leaked, n_boot=500)
    gap = gap_test(models[0], leaked, n_boot=500)
    assert did["did_ci"][1] - did["did_ci"][0] < 0.5 * (gap["gap_ci"][1] - gap["gap_ci"][0])


def test_the_did_interval_covers_zero_when_the_ease_gap_is_shared():
    """Target and 3 references of different strength, the leaked items easier by the same 15 points for all
    (additive: p = strength + ease), 300 items of which 100 leaked, 400 sets: the 95% interval covers 0 in 93.0%
    of them (a percentile interval runs a little short). Band: 91–98%."""
    rng = np.random.default_rng(13)
    leaked = np.arange(300) < 100
    covered = []
    for i in range(400):
        ease = rng.uniform(0.0, 0.3, 300) + 0.15 * leaked
        p = rng.uniform(0.3, 0.5, (4, 1)) + ease
        scores = (rng.random((4, 300)) < p).astype(float)
        lo, hi = difference_in_differences(scores[0], scores[1:], leaked, n_boot=500, seed=i)["did_ci"]
        covered.append(lo <= 0 <= hi)
    assert 0.91 <= np.mean(covered) <= 0.98
