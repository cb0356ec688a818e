"""The canary test's decision over score columns (scoring/audits/canary.py), checked by hand: per-set rank tests,
Fisher's combination, the conclusion's thresholds, and refusal of a score that is not a number."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scoring.audits.canary import canary_test, conclusion


def test_one_set_by_hand():
    # planted 3, 4 against held out 1, 2: all 4 pairs favour planted, U = 4, exact p = 1 / C(4, 2) = 1/6
    res = canary_test({"a": ([3.0, 4.0], [1.0, 2.0])})
    s = res["sets"]["a"]
    assert s["u"] == 4 and s["auc"] == 1.0 and s["p_value"] == pytest.approx(1 / 6) and s["method"] == "exact"
    assert s["mean_plant"] == 3.5 and s["mean_holdout"] == 1.5 and res["combined"] is None
    assert res["p_value"] == s["p_value"] and res["conclusion"].startswith("p = 0.17: no evidence")


def test_two_sets_combine_by_fisher_by_hand():
    # two sets, each p = 1/20 (planted 3 above held-out 3: U = 9, exact p = 1 / C(6, 3)); Fisher: X = -2 ln(p1 p2),
    # chi-square with 4 degrees of freedom: sf(x) = exp(-x/2) (1 + x/2)
    res = canary_test({"a": ([4, 5, 6], [1, 2, 3]), "b": ([14, 15, 16], [11, 12, 13])})
    assert [s["p_value"] for s in res["sets"].values()] == pytest.approx([0.05, 0.05])
    x = -2 * math.log(0.05 * 0.05)
    assert res["combined"]["method"] == "fisher" and res["combined"]["statistic"] == pytest.approx(x)
    assert res["p_value"] == pytest.approx(math.exp(-x / 2) * (1 + x / 2))  # 0.0175
    assert "weak evidence" in res["conclusion"] and "2 sets" in res["conclusion"]


def test_conclusions_follow_the_thresholds_and_a_nan_score_is_refused():
    assert "significant at 1%" in conclusion(0.009) and "not at 1%" in conclusion(0.03)
    assert "not evidence that it was not" in conclusion(0.2)
    with pytest.raises(ValueError, match="not finite"):
        canary_test({"a": ([1.0, np.nan], [0.0, 2.0])})
    with pytest.raises(ValueError):
        canary_test({})
