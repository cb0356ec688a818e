from __future__ import annotations

import random

import pytest

from scoring.semantic.windows import Window, WindowPlan, cut_windows, window_plan, window_starts, word_count


def test_the_plan_is_twice_the_median_item_clamped():
    assert window_plan([10, 20, 30]) == WindowPlan(40, 20)  # median 20
    assert window_plan([10, 20, 30, 41]) == WindowPlan(50, 25)  # median 25 (interpolated)
    assert window_plan([11, 13], factor=1.5) == WindowPlan(18, 9)  # 1.5 x 12
    assert window_plan([3, 4, 5]) == WindowPlan(16, 8)  # 8 clamped up to min_words
    assert window_plan([500]) == WindowPlan(256, 128)  # clamped down to max_words
    assert window_plan([10, 20, 30, 100], quantile=1.0) == WindowPlan(200, 100)
    assert window_plan([20], stride=30) == WindowPlan(40, 30)
    assert WindowPlan(40, 30).contained_span == 11


def test_a_bad_plan_is_refused():
    with pytest.raises(ValueError):
        window_plan([])
    with pytest.raises(ValueError):
        WindowPlan(10, 11)
    with pytest.raises(ValueError):
        WindowPlan(10, 0)


def test_window_starts_cover_the_document_and_align_the_last_window():
    plan = WindowPlan(4, 2)
    assert window_starts(0, plan) == []
    assert window_starts(3, plan) == [0]  # shorter than a window: one window
    assert window_starts(4, plan) == [0]
    assert window_starts(5, plan) == [0, 1]  # the tail word: a window aligned to the end
    assert window_starts(6, plan) == [0, 2]
    assert window_starts(9, plan) == [0, 2, 4, 5]
    assert window_starts(10, WindowPlan(4, 3)) == [0, 3, 6]


def test_windows_are_the_original_substrings_with_their_offsets():
    text = "  Tom has 3,  apples.\nHe eats\tone! "
    ws = cut_windows(text, WindowPlan(3, 2))
    assert ws == [Window(0, 3, 2, 12, "Tom has 3,"), Window(2, 3, 10, 24, "3,  apples.\nHe"),
                  Window(4, 3, 22, 34, "He eats\tone!")]  # 7 words: starts 0, 2, then 4 aligned to the end
    for w in ws:
        assert text[w.char_start:w.char_end] == w.text
    assert cut_windows("only three words", WindowPlan(16, 8)) == [Window(0, 3, 0, 16, "only three words")]
    assert cut_windows(" \n\t ", WindowPlan(16, 8)) == []
    assert cut_windows("", WindowPlan(16, 8)) == []


def test_word_count_matches_the_windows_words():
    assert word_count("Tom has 3,  apples.\n") == 4
    assert word_count("   ") == 0


@pytest.mark.parametrize("size,stride", [(8, 4), (9, 4), (10, 1), (7, 7), (16, 5)])
def test_every_short_span_lies_inside_some_window(size, stride):
    """The docstring's guarantee, by brute force: a span of at most size - stride + 1 words is inside a window."""
    rng = random.Random(size * 100 + stride)
    plan = WindowPlan(size, stride)
    limit = plan.contained_span
    for _ in range(300):
        n = rng.randint(1, 60)
        text = " ".join(f"w{i}" for i in range(n))
        ws = cut_windows(text, plan)
        assert ws[-1].start_word + ws[-1].n_words == n  # no tail lost
        length = rng.randint(1, min(limit, n))
        a = rng.randint(0, n - length)
        assert any(w.start_word <= a and a + length <= w.start_word + w.n_words for w in ws), (n, a, length)


def test_the_guarantee_is_tight():
    """One word more than size - stride + 1 and some span straddles every window."""
    plan = WindowPlan(8, 4)
    ws = cut_windows(" ".join(map(str, range(40))), plan)
    length = plan.contained_span + 1
    assert not any(w.start_word <= 3 and 3 + length <= w.start_word + w.n_words for w in ws)
