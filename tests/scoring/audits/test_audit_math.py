"""Audit arithmetic against hand values: binomial CIs, cluster shares, the FPR correction and its intervals,
seeded snippets, exact n-gram overlap, per-document rates."""
from __future__ import annotations

import math

import numpy as np

import pytest

from scoring.audits.corpus import calibrate, chunk_document, document_rates, plan_snippets
from scoring.stats.proportions import (between_document_variance, binomial_ci, cluster_proportion, clopper_pearson_ci,
                                 finite_corpus_var_r, fpr_corrected, fpr_corrected_bootstrap_ci,
                                 fpr_corrected_delta_ci, wilson_ci)


def test_wilson_by_hand():
    # p = 0.8, n = 10, z = 1.95996: centre (0.8 + z²/20)/(1 + z²/10) = 0.71674, half-width 0.22658
    lo, hi = wilson_ci(8, 10)
    assert (lo, hi) == pytest.approx((0.49016, 0.94332), abs=1e-5)
    assert wilson_ci(0, 10)[0] == 0.0 and wilson_ci(0, 10)[1] == pytest.approx(0.27753, abs=1e-5)
    assert wilson_ci(10, 10)[1] == 1.0


def test_clopper_pearson_by_hand():
    # k = 0: upper = 1 − (α/2)^(1/n); k = n: lower = (α/2)^(1/n)
    assert clopper_pearson_ci(0, 10) == pytest.approx((0.0, 1 - 0.025 ** 0.1))
    assert clopper_pearson_ci(10, 10) == pytest.approx((0.025 ** 0.1, 1.0))
    lo, hi = clopper_pearson_ci(8, 10)
    assert lo < wilson_ci(8, 10)[0] and hi > wilson_ci(8, 10)[1]  # exact is the more conservative
    assert binomial_ci(8, 10, "clopper-pearson") == (lo, hi)
    with pytest.raises(ValueError):
        binomial_ci(1, 2, "wald")


def test_fpr_correction_by_hand():
    assert fpr_corrected(0.5, 0.9, 0.1) == pytest.approx(0.5)  # (0.5 − 0.1)/(0.9 − 0.1)
    assert fpr_corrected(0.26, 0.7, 0.04) == pytest.approx(1 / 3)
    assert fpr_corrected(0.05, 0.9, 0.1) == 0.0  # below the false-positive floor: clipped
    assert fpr_corrected(0.95, 0.9, 0.1) == 1.0
    assert math.isnan(fpr_corrected(0.5, 0.3, 0.3))  # a detector at chance cannot be corrected


def test_cluster_proportion_by_hand():
    # documents a, b, c with 2 snippets each: flagged 2, 0, 1 → p = 0.5;
    # var = 3/2 · ((2 − 1)² + (0 − 1)² + (1 − 1)²) / 6² = 1/12
    p, var, n = cluster_proportion([1, 1, 0, 0, 1, 0], ["a", "a", "b", "b", "c", "c"])
    assert (p, n) == (0.5, 3) and var == pytest.approx(1 / 12)
    p, var, _ = cluster_proportion([1, 0, 0, 1], [1, 2, 3, 4])  # one per cluster → p(1−p)/(n−1)
    assert var == pytest.approx(0.25 / 3)


def test_fpr_corrected_delta_ci_by_hand():
    # π = 0.5; Var π = (0.0025 + 0.25·0.0009 + 0.25·0.0009)/0.8² → se 0.067892; ± 1.95996·se
    lo, hi = fpr_corrected_delta_ci(0.5, 0.0025, 0.9, 0.0009, 0.1, 0.0009)
    assert (lo, hi) == pytest.approx((0.366934, 0.633066), abs=1e-5)
    assert fpr_corrected_delta_ci(0.02, 0.0025, 0.9, 0.0009, 0.1, 0.0009)[0] == 0.0  # clipped


def test_satterthwaite_and_student_t_interval_by_hand():
    from scoring.stats.proportions import satterthwaite_df

    assert satterthwaite_df([0.01, 0.01], [3, 3]) == pytest.approx(6.0)  # 0.02² / (2 · 0.01²/3)
    assert satterthwaite_df([0.01, 0.0], [3, 0]) == pytest.approx(3.0)  # an empty component drops out
    # same inputs as the normal-theory case below, t(6) quantile 2.446912 instead of 1.959964
    lo, hi = fpr_corrected_delta_ci(0.5, 0.0025, 0.9, 0.0009, 0.1, 0.0009, df=6)
    assert (lo, hi) == pytest.approx((0.5 - 2.446912 * 0.0678924, 0.5 + 2.446912 * 0.0678924), abs=1e-5)


def test_finite_corpus_variance_by_hand():
    # calibration member documents flag 90%, 100%, 80% of snippets → s² = 0.01; non-members 0%, 20% → s² = 0.02
    s2_t = between_document_variance([0.9, 1.0, 0.8], 0.9)
    s2_f = between_document_variance([0.0, 0.2], 0.1)
    assert (s2_t, s2_f) == pytest.approx((0.01, 0.02))
    assert between_document_variance([1.0], 0.75) == pytest.approx(0.1875)  # one document: p(1 − p)
    # 4 audited documents of equal size, π = 0.25: Σw² = 1/4 → (0.25·0.01 + 0.75·0.02)/4 = 0.004375
    assert finite_corpus_var_r(0.25, s2_t, s2_f, [100, 100, 100, 100]) == pytest.approx(0.004375)
    # unequal sizes weigh in: w = 0.5, 0.25, 0.25 → Σw² = 0.375; π clipped to 1 → 0.375·0.01
    assert finite_corpus_var_r(1.7, s2_t, s2_f, [2, 1, 1]) == pytest.approx(0.00375)


def test_fpr_corrected_bootstrap_reduces_to_the_target_share_for_a_perfect_detector():
    flags = [1] * 30 + [0] * 70
    docs = [i // 10 for i in range(100)]  # 10 documents of 10 snippets, 3 fully flagged
    perfect = ([1] * 20, list(range(20))), ([0] * 20, list(range(20)))
    res = fpr_corrected_bootstrap_ci((flags, docs), *perfect, n=2000, seed=1)
    assert res == fpr_corrected_bootstrap_ci((flags, docs), *perfect, n=2000, seed=1)  # seeded
    lo, hi = res["ci"]
    assert lo < 0.3 < hi and lo >= 0.0 and hi <= 0.7 and res["n_degenerate"] == 0
    # calibration at chance: every resample degenerate or unstable → wide or NaN, never a tight wrong answer
    chance = ([1, 0] * 10, list(range(20))), ([1, 0] * 10, list(range(20)))
    res = fpr_corrected_bootstrap_ci((flags, docs), *chance, n=500, seed=1)
    assert res["n_degenerate"] > 0


DOC = {"id": "book-1", "text": " ".join(f"w{i}" for i in range(1000))}


def test_snippets_are_seeded_by_document_id_distinct_and_full_length():
    a = plan_snippets(DOC, 20, 100, seed=0)
    assert a == plan_snippets(dict(DOC), 20, 100, seed=0)
    assert a != plan_snippets(DOC, 20, 100, seed=1)
    assert a != plan_snippets(dict(DOC, id="book-2"), 20, 100, seed=0)
    starts = [s["start_word"] for s in a]
    assert len(set(starts)) == 20 and max(starts) <= 900
    assert all(len(s["text"].split()) == 100 and s["text"].split()[0] == f"w{s['start_word']}" for s in a)
    short = plan_snippets({"id": "x", "text": "just five words here ok"}, 100, 512, seed=0)
    assert len(short) == 1 and short[0]["n_words"] == 5
    assert len(plan_snippets(DOC, 5000, 990, seed=0)) == 11  # only 11 distinct starts exist


def test_chunks_are_consecutive_and_drop_a_short_tail():
    chunks = chunk_document(DOC, 300, min_words=150)
    assert [c["start_word"] for c in chunks] == [0, 300, 600]  # the 100-word tail is dropped
    assert len(chunk_document(DOC, 300, min_words=50)) == 4


def test_document_rates_and_evidence_by_hand():
    snips = [{"doc_id": "a", "index": i, "start_word": i, "text": f"a{i}", "score": s}
             for i, s in enumerate([-1.0, -2.0, -3.0, -4.0])] + \
            [{"doc_id": "b", "index": 0, "start_word": 0, "text": "b0", "score": -5.0}]
    docs = {d["id"]: d for d in document_rates(snips, threshold=-2.5, top_k=2)}
    assert docs["a"]["n_flagged"] == 2 and docs["a"]["rate"] == 0.5
    assert docs["a"]["rate_ci"] == pytest.approx(list(wilson_ci(2, 4)))
    assert [s["text"] for s in docs["a"]["top_snippets"]] == ["a0", "a1"]
    assert docs["b"]["rate"] == 0.0


def test_calibrate_max_accuracy_and_cluster_rates():
    labels = [1, 1, 1, 1, 0, 0, 0, 0]
    scores = [0.9, 0.8, 0.7, 0.2, 0.6, 0.3, 0.1, 0.0]
    cal = calibrate(labels, scores, ["m1", "m1", "m2", "m2", "n1", "n1", "n2", "n2"])
    # threshold 0.7 is right 7 times in 8 (0.6 and 0.2 only 6): TPR 3/4, FPR 0
    assert cal.threshold.value == 0.7 and cal.tpr == 0.75 and cal.fpr == 0.0
    with pytest.raises(ValueError, match="members and non-members"):
        calibrate([1, 1], [0.1, 0.2], ["a", "b"])
    cal = calibrate(labels, scores, list(range(8)), objective="fpr", target_fpr=0.25)
    # 0.2 would catch every member but two non-members (FPR 0.5); the lowest threshold within FPR 0.25 is 0.6
    assert (cal.threshold.value, cal.tpr, cal.fpr) == (0.6, 0.75, 0.25)


def test_corpus_summary_wires_the_correction_by_hand():
    from scoring.audits.corpus import Calibration, corpus_summary
    from scoring.stats.metrics import Threshold

    cal = Calibration(Threshold(0.0, "accuracy", 0.8, 0.2, 0.8), 20, 20, tpr=0.8, fpr=0.2, var_tpr=0.008,
                      var_fpr=0.008, doc_var_tpr=0.16, doc_var_fpr=0.16)
    scores = np.asarray([1.0 if i < 4 else -1.0 for i in range(10)])  # 4 of 10 flagged
    out = corpus_summary(scores, np.asarray([f"ex{i}" for i in range(10)]), np.zeros(0), cal, benchmark=True)
    assert out["flagged_share"] == 0.4 and out["flagged_share_ci"] == pytest.approx(list(wilson_ci(4, 10)))
    corr = out["fpr_corrected"]
    assert corr["estimate"] == pytest.approx(1 / 3)  # (0.4 − 0.2)/(0.8 − 0.2)
    # Var r = Σw²·(π·0.16 + (1 − π)·0.16) = 0.1·0.16; Var π = (0.016 + π²·0.008 + (1 − π)²·0.008)/0.6² = 0.05679
    assert corr["ci"] == pytest.approx([0.0, 1 / 3 + 1.959964 * 0.2383068], abs=1e-5)


def test_rates_by_document_handles_nan_and_top_snippets_break_ties_in_order():
    from scoring.audits.corpus import rates_by_document, top_snippets

    codes = np.asarray([0, 0, 0, 1, 1])
    scores = np.asarray([np.nan, -1.0, -1.0, np.nan, np.nan])
    r = rates_by_document(codes, scores, threshold=-2.0, n_docs=2)
    assert r["n_snippets"].tolist() == [3, 2] and r["n_flagged"].tolist() == [2, 0]
    assert r["max_score"][0] == -1.0 and math.isnan(r["max_score"][1])
    top = top_snippets(codes, scores, top_k=2)
    assert top == {0: [1, 2], 1: [3, 4]}  # equal scores keep input order; NaN goes last
    assert top_snippets(codes, scores, top_k=1, wanted=np.asarray([1])) == {1: [3]}


def test_cluster_bootstrap_is_the_same_with_sorted_integer_codes_as_with_ids():
    from scoring.stats.proportions import fpr_corrected_bootstrap_ci

    rng = np.random.default_rng(1)
    ids = np.asarray([f"doc{i % 37}" for i in range(300)], dtype=object)
    uniq, codes = np.unique(ids, return_inverse=True)
    flags = rng.integers(0, 2, 300)
    m = (rng.integers(0, 2, 50), [f"m{i % 9}" for i in range(50)])
    n = (rng.integers(0, 2, 50), [f"n{i % 7}" for i in range(50)])
    a = fpr_corrected_bootstrap_ci((flags, ids), m, n, n=200, seed=3)
    b = fpr_corrected_bootstrap_ci((flags, codes), m, n, n=200, seed=3)
    assert a == b and cluster_proportion(flags, ids) == cluster_proportion(flags, codes)


def test_blocked_bootstraps_equal_one_big_draw():
    """The corpus bootstraps draw their resamples in blocks (bounded memory at any corpus size); the numbers are
    those of the single [n, size] draw they replaced."""
    from scoring.stats.proportions import bootstrap_mean_ci, resampled_rows

    v = np.random.default_rng(0).random(5000)
    big = v[np.random.default_rng(7).integers(0, v.size, size=(300, v.size))].mean(1)
    blocked = resampled_rows(np.random.default_rng(7), 300, v.size, lambda idx: v[idx].mean(1), budget=40_000)
    np.testing.assert_array_equal(big, blocked)
    lo, hi = np.quantile(big, [0.025, 0.975])
    assert bootstrap_mean_ci(v, n=300, seed=7) == (float(lo), float(hi))


@pytest.mark.parametrize("method", ["wilson", "clopper-pearson"])
def test_vectorised_binomial_cis_equal_the_scalar_ones(method):
    """The audit computes one interval per document with `binomial_cis`; each must be the scalar function's."""
    from scoring.stats.proportions import binomial_cis

    n = np.asarray([0, 1, 1, 2, 5, 5, 5, 10, 37, 100, 1000])
    k = np.asarray([0, 0, 1, 1, 0, 3, 5, 9, 11, 50, 999])
    lo, hi = binomial_cis(k, n, method)
    for a, b, l, h in zip(k, n, lo, hi):
        want = binomial_ci(int(a), int(b), method)
        if b == 0:
            assert math.isnan(l) and math.isnan(h) and all(math.isnan(x) for x in want)
        else:
            assert (l, h) == pytest.approx(want, abs=1e-12)
    with pytest.raises(ValueError):
        binomial_cis(k, n, "wald")
