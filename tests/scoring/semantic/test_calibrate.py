from __future__ import annotations

import numpy as np
import pytest

from scoring.semantic.calibrate import (ABSTAIN_COSINE, COSINE_FLOOR, Calibration, decision_score, null_rate,
                                        threshold_from_null)


def test_the_threshold_flags_at_most_the_target_share_of_the_null():
    null = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    c = threshold_from_null(null, 0.2)
    assert (c.threshold, c.n_null, c.n_flagged, c.expected_false_flag_rate) == (0.8, 10, 2, 0.2)
    # one-sided 95% Clopper-Pearson upper bound for 2 of 10: the Beta(3, 8) 95th percentile, 0.5069
    assert c.upper_bound == pytest.approx(0.50690, abs=1e-4)
    assert threshold_from_null(null, 0.25).threshold == 0.8  # 2.5 items: 2 admitted
    assert threshold_from_null(null, 0.3).threshold == 0.7


def test_tied_null_scores_are_left_out_whole():
    null = [0.1] * 5 + [0.5, 0.5, 0.5] + [0.9, 0.95]
    c = threshold_from_null(null, 0.3)  # 3 may be flagged; 0.5 would flag 5, so the bar stays at 0.9
    assert (c.threshold, c.n_flagged, c.expected_false_flag_rate) == (0.9, 2, 0.2)
    all_tied = threshold_from_null([0.4] * 20, 0.1)  # no value qualifies: only scores above every null one
    assert all_tied.threshold > 0.4 and all_tied.n_flagged == 0
    assert all_tied.threshold == np.nextafter(0.4, 1)


def test_a_clean_null_still_bounds_the_rate():
    c = threshold_from_null([0.0] * 500, 0.01)
    assert c.n_flagged == 0 and c.expected_false_flag_rate == 0.0
    assert c.upper_bound == pytest.approx(1 - 0.05 ** (1 / 500))  # ~ 3/n, the rule of three
    assert c.upper_bound == pytest.approx(0.005974, abs=1e-6)


def test_null_rate_measures_a_threshold_on_a_held_out_null():
    c = null_rate([0.2, 0.7, np.nan, 0.9, 0.7], 0.7)
    assert c == Calibration(0.7, 4, 3, 0.75, c.upper_bound)
    assert c.upper_bound == pytest.approx(0.95 ** 0.25)  # Beta(4, 1) has CDF x^4: its 95th percentile
    with pytest.raises(ValueError):
        null_rate([np.nan], 0.5)


def test_the_decision_score():
    assert COSINE_FLOOR == 0.5 and ABSTAIN_COSINE == 0.9  # the hand values below assume these
    assert decision_score(0.45, 1.0, False) == 0.0  # below the floor: nothing, however many anchors match
    assert decision_score(0.6, 0.75, False) == 0.75  # the verifier decides
    assert decision_score(0.99, 0.1, False) == 0.1  # a close cosine with the anchors missing: a different item
    assert decision_score(0.95, 1.0, True) == pytest.approx(0.5)  # abstaining: cosine over the stricter bar
    assert decision_score(0.85, 1.0, True) == 0.0
    out = decision_score(np.array([0.3, 0.7, 0.97, 1.0]), np.array([0.9, 0.9, 0.0, 0.0]),
                         np.array([False, False, True, True]))
    np.testing.assert_allclose(out, [0.0, 0.9, 0.7, 1.0])
