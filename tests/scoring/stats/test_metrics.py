"""Metrics against hand-counted values."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.stats.metrics import (apply_threshold, bootstrap_auc_ci, calibrate_threshold, roc_auc, summarize,
                             tpr_at_fpr)

LABELS = [0, 0, 1, 1]
SCORES = [0.1, 0.4, 0.35, 0.8]  # of the 4 member/non-member pairs, 3 are ordered correctly → AUC 0.75


def test_auc_counts_correctly_ordered_pairs_and_ties_count_half():
    assert roc_auc(LABELS, SCORES) == pytest.approx(0.75)
    assert roc_auc([0, 1], [0.5, 0.5]) == pytest.approx(0.5)
    assert roc_auc([0, 0, 1], [3, 2, 1]) == pytest.approx(0.0)  # reported as is, never flipped


def test_auc_is_nan_with_one_class_and_ignores_nan_scores():
    assert np.isnan(roc_auc([1, 1], [0.1, 0.2]))
    assert roc_auc([0, 1, 1], [0.1, float("nan"), 0.9]) == pytest.approx(1.0)


def test_tpr_at_fpr_reads_the_roc_curve_without_interpolating():
    labels = [0] * 10 + [1] * 4
    scores = list(range(10)) + [9.5, 8.5, 5.5, 0.5]  # members beat 10, 9, 6 and 1 non-members
    assert tpr_at_fpr(labels, scores, 0.0) == pytest.approx(0.25)  # only 9.5 is above every non-member
    assert tpr_at_fpr(labels, scores, 0.1) == pytest.approx(0.5)  # 1 false positive allowed: 8.5 joins
    assert tpr_at_fpr(labels, scores, 0.05) == pytest.approx(0.25)


def test_bootstrap_ci_is_seeded_and_brackets_the_auc():
    rng = np.random.default_rng(0)
    y = np.r_[np.zeros(100), np.ones(100)].astype(int)
    s = np.r_[rng.normal(0, 1, 100), rng.normal(1, 1, 100)]
    lo, hi = bootstrap_auc_ci(y, s, n=300, seed=7)
    assert (lo, hi) == bootstrap_auc_ci(y, s, n=300, seed=7)
    assert (lo, hi) != bootstrap_auc_ci(y, s, n=300, seed=8)
    assert lo < roc_auc(y, s) < hi and hi - lo < 0.2


def test_summary_record_has_the_contract_fields():
    rec = summarize(LABELS, SCORES, n_bootstrap=50)
    assert set(rec) >= {"n", "auc", "auc_ci", "tpr_at_1_fpr", "tpr_at_5_fpr"}
    assert rec["n"] == 4 and rec["auc"] == pytest.approx(0.75)


def test_accuracy_threshold_is_calibrated_on_one_split_and_applied_to_another():
    # Calibration: members ≥ 0.5 except one at 0.15; cutting at 0.5 gets 5 of 6 right, at 0.15 only 4.
    th = calibrate_threshold([0, 0, 0, 1, 1, 1], [0.1, 0.2, 0.3, 0.5, 0.6, 0.15], "accuracy")
    assert th.value == pytest.approx(0.5) and th.calib_score == pytest.approx(5 / 6)
    test = apply_threshold(th, [0, 1, 1, 0], [0.7, 0.9, 0.4, 0.1])
    assert test["accuracy"] == pytest.approx(0.5) and test["tpr"] == pytest.approx(0.5)
    assert test["fpr"] == pytest.approx(0.5)


def test_f1_and_fpr_objectives():
    labels, scores = [0, 0, 0, 1, 1, 1], [0.1, 0.2, 0.3, 0.5, 0.6, 0.25]
    f1 = calibrate_threshold(labels, scores, "f1")
    # flagging ≥ 0.25 gives TP 3, FP 1 → F1 6/7, better than ≥ 0.5 (TP 2 → F1 0.8)
    assert f1.value == pytest.approx(0.25) and f1.calib_score == pytest.approx(6 / 7)
    strict = calibrate_threshold(labels, scores, "fpr", target_fpr=0.0)
    assert strict.calib_fpr == 0.0 and strict.value == pytest.approx(0.5)
    with pytest.raises(ValueError):
        calibrate_threshold(labels, scores, "auc")


@pytest.mark.parametrize("decimals", [1, None])
def test_vectorised_bootstrap_equals_a_roc_auc_score_loop_with_and_without_ties(decimals):
    from sklearn.metrics import roc_auc_score

    from scoring.stats.metrics import resampled_aucs

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 40)
    s = rng.normal(size=40) + 0.7 * y
    s = np.round(s, decimals) if decimals else s  # rounded: many tied scores; else the no-ties fast path
    assert (np.unique(s).size < 40) == bool(decimals)
    idx = rng.integers(0, 40, size=(150, 40))
    idx[0] = np.flatnonzero(y == 1)[0]  # a one-class resample is skipped, as the loop skips it
    loop = [roc_auc_score(y[r], s[r]) for r in idx if 0 < y[r].sum() < 40]
    got = resampled_aucs(y, s, idx, block=16)
    assert len(got) == len(loop) == 149
    np.testing.assert_allclose(got, loop, atol=1e-12)


def _exhaustive_threshold(labels, scores, objective, target_fpr=0.05):
    """The old calibration, kept here as the reference: try every distinct score (and +inf) over the whole array."""
    y, s = np.asarray(labels, dtype=np.int64), np.asarray(scores, dtype=np.float64)
    best = None
    for t in np.concatenate([np.unique(s), [np.inf]]):
        pred = (s >= t).astype(np.int64)
        pos, neg = max(int(y.sum()), 1), max(int((1 - y).sum()), 1)
        tpr, fpr = (pred & y).sum() / pos, (pred & (1 - y)).sum() / neg
        if objective == "accuracy":
            val = float((pred == y).mean())
        elif objective == "f1":
            denom = int(pred.sum()) + int(y.sum())
            val = 2 * int((pred & y).sum()) / denom if denom else 0.0
        else:
            val = tpr if fpr <= target_fpr + 1e-12 else -1.0
        if best is None or val > best[1]:
            best = (float(t), val)
    return best


@pytest.mark.parametrize("objective", ["accuracy", "f1", "fpr"])
@pytest.mark.parametrize("seed", range(6))
def test_sorted_calibration_equals_the_exhaustive_search_with_ties(objective, seed):
    from scoring.stats.metrics import calibrate_threshold

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    y = rng.integers(0, 2, size=n)
    s = np.round(rng.normal(size=n) + 0.7 * y, 1)  # rounding makes many ties, across the classes too
    t = calibrate_threshold(y, s, objective=objective)
    want_t, want_val = _exhaustive_threshold(y, s, objective)
    assert t.value == want_t and t.calib_score == pytest.approx(want_val, abs=1e-12)


def test_bootstrap_drawn_in_blocks_equals_one_draw():
    """The CI is computed from resamples drawn 64 at a time; it must equal the CI from one (n, size) draw."""
    from scoring.stats.metrics import resampled_aucs

    rng = np.random.default_rng(5)
    y = rng.integers(0, 2, size=300)
    s = np.round(rng.normal(size=300) + y, 1)
    idx = np.random.default_rng(11).integers(0, y.size, size=(200, y.size))
    want = np.quantile(resampled_aucs(y, s, idx), [0.025, 0.975])
    assert bootstrap_auc_ci(y, s, n=200, seed=11) == (float(want[0]), float(want[1]))
