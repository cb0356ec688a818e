"""Splits of benchmark items by what leaked, and the detector threshold at a fixed false-positive rate, by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scoring.impact.splits import SPLITS, flag_at_fpr, label_splits, leaked_from_share


def test_every_combination_of_evidence_has_its_split():
    got = label_splits(np.array([False, True, True, False]), np.array([False, False, True, True]))
    assert list(got) == ["clean", "input_leaked", "input_and_answer_leaked", "answer_leaked"]
    assert set(got) <= set(SPLITS)


def test_without_answer_evidence_an_item_is_only_clean_or_input_leaked():
    assert list(label_splits([True, False, True])) == ["input_leaked", "clean", "input_leaked"]
    assert list(label_splits([1, 0])) == ["input_leaked", "clean"]  # 0/1 integers are booleans too


def test_a_rephrase_is_not_clean_and_verbatim_evidence_names_the_split_first():
    inp = [False, False, True, False, False, True]
    ans = [False, False, False, True, True, True]
    reph = [False, True, True, False, True, True]
    assert list(label_splits(inp, ans, reph)) == ["clean", "rephrased_leaked", "input_leaked", "answer_leaked",
                                                  "rephrased_leaked", "input_and_answer_leaked"]
    # semantic evidence alone (overlap --semantic --n 0): an item is clean or rephrased, nothing verbatim claimed
    assert list(label_splits([False, False], None, [True, False])) == ["rephrased_leaked", "clean"]
    with pytest.raises(ValueError, match="2 items, rephrased 1"):
        label_splits([False, False], None, [True])


def test_split_inputs_are_checked():
    with pytest.raises(ValueError, match="3 items, answer_leaked 2"):
        label_splits([True, False, True], [True, False])
    with pytest.raises(ValueError, match="booleans"):
        label_splits(np.array([1.0, np.nan]))  # NaN would turn True under astype(bool)


def test_any_overlap_is_a_leak_and_an_unchecked_item_is_not():
    share = np.array([0.0, 0.01, math.nan, 0.5])
    assert list(leaked_from_share(share)) == [False, True, False, True]
    assert list(leaked_from_share(share, threshold=0.1)) == [False, False, False, True]
    assert int(np.isnan(share).sum()) == 1  # what the caller reports as unchecked


def test_the_threshold_lets_through_at_most_fpr_of_the_reference():
    ref = np.arange(1.0, 21.0)  # 1 … 20: 5% of 20 is 1 item
    flags, threshold = flag_at_fpr([19.5, 20.0, 21.0, math.nan], ref, fpr=0.05)
    assert threshold == 20.0 and list(flags) == [False, True, True, False]  # >= flags the tie; NaN never flagged
    flags, threshold = flag_at_fpr([17.0, 16.9], ref, fpr=0.2)  # 4 of 20: 17, 18, 19, 20
    assert threshold == 17.0 and list(flags) == [True, False]


def test_a_tie_across_the_boundary_is_left_out_whole():
    ref = [1.0, 2.0, 3.0, 3.0]
    # budget 1 of 4: the two 3.0s together would be 2, so neither is admitted and only scores above 3 pass
    flags, threshold = flag_at_fpr([3.0, 3.5], ref, fpr=0.25)
    assert threshold == np.nextafter(3.0, np.inf) and list(flags) == [False, True]
    # budget 2 of 4 admits the tie
    flags, threshold = flag_at_fpr([3.0, 2.5], ref, fpr=0.5)
    assert threshold == 3.0 and list(flags) == [True, False]


def test_fpr_zero_and_one():
    ref = [0.2, 0.5, 0.9]
    flags, threshold = flag_at_fpr([0.9, 0.95], ref, fpr=0.0)
    assert threshold > 0.9 and list(flags) == [False, True]
    flags, threshold = flag_at_fpr(ref, ref, fpr=1.0)
    assert threshold == 0.2 and flags.all()


def test_a_float_budget_a_hair_under_an_integer_is_not_rounded_down():
    ref = np.linspace(0, 1, 100)
    assert 0.29 * 100 < 29  # the trap
    _, threshold = flag_at_fpr([], ref, fpr=0.29)
    assert int((ref >= threshold).sum()) == 29


def test_the_realised_fpr_is_the_largest_within_budget_on_random_scores():
    rng = np.random.default_rng(3)
    for _ in range(50):
        ref = np.round(rng.normal(size=rng.integers(5, 60)), 1)  # rounded: plenty of ties
        fpr = float(rng.uniform(0, 0.5))
        _, t = flag_at_fpr([], ref, fpr=fpr)
        k = math.floor(fpr * ref.size + 1e-9)
        assert (ref >= t).sum() <= k
        below = ref[ref < t]
        if below.size:  # admitting the next lower value (whole tie) would overrun the budget
            assert (ref >= below.max()).sum() > k


def test_reference_nans_are_left_out_and_none_left_is_an_error():
    _, threshold = flag_at_fpr([1.0], [math.nan, 1.0, 2.0], fpr=0.5)
    assert threshold == 2.0  # n_ref = 2, budget 1
    with pytest.raises(ValueError, match="reference score"):
        flag_at_fpr([1.0], [math.nan])
    with pytest.raises(ValueError, match="fpr"):
        flag_at_fpr([1.0], [1.0], fpr=1.5)
