"""Dataset inference's statistics (scoring/audits/dataset_inference.py) on hand-made numbers: the Welch t by hand, the
learn/test split, and calibration under the null, which is what makes the p-value mean anything."""
from __future__ import annotations

import numpy as np
import pytest

from scoring.audits.dataset_inference import dataset_inference, halves, welch_one_sided


def test_welch_t_by_hand():
    a, b = np.array([3.0, 4.0, 5.0, 8.0]), np.array([1.0, 2.0, 2.0, 3.0, 2.0])
    # mean a = 5, var a = (4+1+0+9)/3 = 14/3; mean b = 2, var b = (1+0+0+1+0)/4 = 1/2
    va, vb = (14 / 3) / 4, 0.5 / 5
    t = 3 / np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4)
    got = welch_one_sided(a, b)
    assert got.t == pytest.approx(t) and got.df == pytest.approx(df)
    from scipy import stats

    assert got.p_value == pytest.approx(stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)
    assert welch_one_sided(b, a).p_value == pytest.approx(1 - got.p_value)


def test_halves_are_disjoint_and_cover():
    a, b = halves(9, np.random.default_rng(0))
    assert len(a) == 4 and len(b) == 5 and set(a) | set(b) == set(range(9)) and not set(a) & set(b)


def test_a_real_difference_is_found_and_the_informative_feature_gets_the_weight():
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(200, 1))
    suspect = np.hstack([rng.normal(0.8, 1, (200, 1)), noise[:100].repeat(2, 0)[:200]])
    validation = np.hstack([rng.normal(0.0, 1, (200, 1)), rng.normal(size=(200, 1))])
    res = dataset_inference(suspect, validation, ["signal", "noise"], seed=0)
    assert res["p_value"] < 1e-6 and res["t"] > 5
    assert abs(res["weights"]["signal"]) > 5 * abs(res["weights"]["noise"])
    assert res["sizes"] == {"suspect_learn": 100, "suspect_test": 100, "validation_learn": 100,
                            "validation_test": 100}


def test_the_test_holds_its_false_positive_rate_under_the_null():
    """Two sets from one distribution, drawn afresh each time: p must be about uniform (5% below 0.05)."""
    ps = []
    for s in range(300):
        x = np.random.default_rng(100 + s).normal(size=(120, 4))
        x[:, 3] = np.nan  # a feature with no values, and non-finite values in another, must not break anything
        x[::7, 1] = np.inf
        ps.append(dataset_inference(x[:60], x[60:], ["a", "b", "c", "d"], seed=s)["p_value"])
    ps = np.array(ps)
    assert 0.01 < np.mean(ps < 0.05) < 0.1, np.mean(ps < 0.05)
    assert 0.4 < np.median(ps) < 0.6 and 0.2 < np.quantile(ps, 0.25) < 0.3


def test_too_few_texts_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 4 texts"):
        dataset_inference(np.zeros((3, 1)), np.zeros((10, 1)), ["a"])
