"""The new-documents estimator (scoring/cutoff/breakpoint.py): the fit against hand-computed values, invariance to a
trend, the p-value's calibration under the null (many independently drawn null sets), power, and the CI."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from scoring.cutoff.breakpoint import CutoffSettings, MonthData, break_scan, estimate_break
from scoring.cutoff.periods import month_index

FAST = CutoffSettings(permutations=499, bootstrap=200)
M0 = month_index(2020, 1)


def series(rng, *, months=24, n=20, step=0.0, at=11, slope=0.0, sd=0.3, month_sd=0.0):
    """Per-document scores: a step of `step` down after month `at` (0-based), a slope per month, document noise and a
    random month effect."""
    t = np.repeat(np.arange(months), n)
    y = slope * t + np.where(t <= at, step, 0.0) + rng.normal(0, sd, t.size)
    y += np.repeat(rng.normal(0, month_sd, months), n)
    return M0 + t, y


def test_break_scan_matches_a_hand_computed_fit():
    # six months, a clean step: one admissible break (min_side 3) after month 2.
    x = np.arange(6.0) - 2.5
    js, r, drop, rss0 = break_scan(x, np.ones(6), np.array([1.0, 1, 1, 0, 0, 0]), 3)
    assert js.tolist() == [2]
    # H0: slope = Sxy/Sxx = -4.5/17.5; RSS0 = Syy - slope*Sxy = 1.5 - 4.5**2/17.5
    assert rss0 == pytest.approx(1.5 - 4.5 ** 2 / 17.5)
    assert r[0] == pytest.approx(1.0)  # both segments are flat lines: RSS1 = 0
    assert drop[0] == pytest.approx(1.0)  # 1 before, 0 after, at the boundary
    # a rise is not a cutoff: the same step upwards is not admissible
    _, r_up, drop_up, _ = break_scan(x, np.ones(6), np.array([0.0, 0, 0, 1, 1, 1]), 3)
    assert r_up[0] == 0.0 and drop_up[0] == pytest.approx(-1.0)


def test_weighted_month_means_equal_the_per_document_fit():
    """Fitting month means with weights n_m is fitting the documents: the same lines, the same best break."""
    rng = np.random.default_rng(3)
    months, y = series(rng, months=8, n=5, step=0.5, at=3)
    months[::7] += 0  # unequal counts: drop a few documents
    keep = rng.random(months.size) > 0.2
    months, y = months[keep], y[keep]
    data = MonthData.of(months, y)
    x = (data.months - data.months.mean()).astype(float)
    js, r, _, rss0 = break_scan(x, data.n.astype(float), data.mean, 2)
    within = sum(((y[months == m] - y[months == m].mean()) ** 2).sum() for m in data.months)
    xd = (months - data.months.mean()).astype(float)
    for j, rj in zip(js, r):
        rss1 = 0.0
        for side in (months <= data.months[j], months > data.months[j]):
            coef = np.polyfit(xd[side], y[side], 1)
            rss1 += ((y[side] - np.polyval(coef, xd[side])) ** 2).sum()
        coef0 = np.polyfit(xd, y, 1)
        rss0_docs = ((y - np.polyval(coef0, xd)) ** 2).sum()
        assert rss0 + within == pytest.approx(rss0_docs)
        if rj > 0:
            assert rj == pytest.approx(1 - (rss1 - within) / (rss0_docs - within))


def test_recovers_a_step_with_its_ci_and_a_small_p():
    months, y = series(np.random.default_rng(0), step=0.4, at=13, slope=-0.02)
    res = estimate_break(months, y, CutoffSettings(permutations=9999, bootstrap=500))
    assert res["cutoff"] == "2021-02"  # month 13 after 2020-01
    lo, hi = res["cutoff_ci"]
    assert lo <= "2021-02" <= hi
    assert res["p_no_cutoff"] < 0.001  # the +1 correction: at best 1/10000
    assert res["p_no_cutoff"] >= 1 / 10000
    assert res["drop"]["size"] == pytest.approx(0.4, abs=0.15)
    assert len(res["per_period"]) == 24 and all(p["ci_low"] <= p["score"] <= p["ci_high"] for p in res["per_period"])


def test_a_trend_changes_nothing():
    """Adding any line to the scores leaves R, the drop, the best break and p unchanged: no drift can make a step."""
    months, y = series(np.random.default_rng(1), step=0.3, at=9)
    t = months - M0
    a = estimate_break(months, y, FAST)
    b = estimate_break(months, y + 0.05 * t - 2.0, FAST)
    for k in ("best_break", "p_no_cutoff", "cutoff", "cutoff_ci"):
        assert a[k] == b[k]
    assert a["statistic"] == pytest.approx(b["statistic"])
    assert a["drop"]["size"] == pytest.approx(b["drop"]["size"])


@pytest.mark.parametrize("month_sd, slope", [(0.0, 0.0), (0.08, -0.03), (0.15, 0.02)])
def test_p_is_calibrated_under_the_null(month_sd, slope):
    """Many independently drawn sets with no cutoff (a trend, document noise, a month effect): p < 0.05 in about 5%
    of them, p < 0.01 in about 1% (the test is of the month means, so a month effect does not inflate it)."""
    ps = []
    for seed in range(300):
        months, y = series(np.random.default_rng(1000 + seed), months=18, n=10, slope=slope, month_sd=month_sd)
        ps.append(estimate_break(months, y, CutoffSettings(permutations=199, bootstrap=50, seed=seed))["p_no_cutoff"])
    ps = np.asarray(ps)
    assert 0.015 <= (ps < 0.05).mean() <= 0.095
    assert (ps < 0.01).mean() <= 0.035
    assert all(p > 0 for p in ps)


def test_no_cutoff_is_none_not_a_random_month():
    months, y = series(np.random.default_rng(7), slope=0.01)
    res = estimate_break(months, y, FAST)
    assert res["cutoff"] is None and res["cutoff_ci"] is None and res["p_no_cutoff"] >= 0.01
    assert res["best_break"] is not None  # the best candidate is still reported, as a candidate


def test_too_few_months_is_not_tested():
    months, y = series(np.random.default_rng(2), months=5)
    res = estimate_break(months, y, FAST)
    assert res["p_no_cutoff"] is None and "at least 3 on each side" in res["not_tested"]


def test_the_ci_covers_the_truth_in_most_studies():
    hits = 0
    for seed in range(40):
        months, y = series(np.random.default_rng(seed), months=20, n=15, step=0.25, at=9)
        res = estimate_break(months, y, CutoffSettings(permutations=199, bootstrap=200, seed=seed))
        lo, hi = res["best_break_ci"]
        hits += lo <= "2020-10" <= hi
    assert hits >= 34  # nominal 95%; the percentile interval of a discrete argmax is about that or wider


def test_gaps_between_months_are_time():
    """Months without documents are a gap on the time axis, not skipped: the fit uses the month index."""
    rng = np.random.default_rng(4)
    t = np.repeat(np.r_[np.arange(6), np.arange(12, 18)], 20)
    y = np.where(t <= 5, 0.5, 0.0) + rng.normal(0, 0.2, t.size)
    res = estimate_break(M0 + t, y, FAST)
    assert res["best_break"] == "2020-06" and res["drop"]["at"] == "between 2020-06 and 2021-01"


def test_exhaustive_small_case_matches_the_permutation_p():
    """With 6 months the permutation distribution can be enumerated: the sampled p agrees with it."""
    from scoring.cutoff.breakpoint import _trend

    rng = np.random.default_rng(9)
    months, y = series(rng, months=6, n=4, step=0.3, at=2)
    data = MonthData.of(months, y)
    x = (data.months - data.months.mean()).astype(float)
    w = data.n.astype(float)
    a, b = _trend(x, w, data.mean)
    scaled = (data.mean - (a + b * x)) * np.sqrt(w)
    _, r_obs, _, _ = break_scan(x, w, data.mean, 3)
    perms = np.array([scaled[list(p)] for p in itertools.permutations(range(6))]) / np.sqrt(w)
    _, r_all, _, _ = break_scan(x, w, perms, 3)
    exact = float(np.mean(r_all.max(axis=1) >= r_obs.max() - 1e-12))
    sampled = estimate_break(months, y, CutoffSettings(permutations=20000, bootstrap=50))["p_no_cutoff"]
    assert sampled == pytest.approx(exact, abs=0.01)
