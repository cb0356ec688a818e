"""The canary test's rank statistics by hand, and its false-positive rate under the null."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.stats.rank_test import combined_p, planted_vs_holdout


def test_exact_p_value_by_hand():
    # planted {3,4,5} all above held-out {0,1,2}: U = 9 of 9, and 1 of the C(6,3) = 20 equally likely splits is
    # that extreme, so p = 1/20.
    r = planted_vs_holdout([3, 4, 5], [0, 1, 2])
    assert (r["u"], r["auc"], r["method"]) == (9.0, 1.0, "exact") and r["p_value"] == pytest.approx(0.05)
    # one swap: U = 8, and 2 of the 20 splits reach 8 or more: p = 2/20.
    assert planted_vs_holdout([2, 4, 5], [0, 1, 3])["p_value"] == pytest.approx(0.10)


def test_under_the_null_the_false_positive_rate_is_the_p_value():
    """Scores from one distribution, roles re-drawn 2,000 times: p < 0.05 about 5% of the time, never far more."""
    rng = np.random.default_rng(0)
    p = [planted_vs_holdout(*np.split(rng.normal(size=40), 2))["p_value"] for _ in range(2000)]
    rate = np.mean(np.asarray(p) < 0.05)
    assert 0.03 <= rate <= 0.065, rate


def test_fisher_combines_independent_sets():
    assert combined_p([1.0, 1.0])["p_value"] == pytest.approx(1.0)
    assert combined_p([0.01, 0.01])["p_value"] < 0.01
