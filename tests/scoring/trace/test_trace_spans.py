"""Maximal spans, rarity and BM25 against hand-computed values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from scoring.trace.ranking import bm25_scores
from scoring.trace.spans import kept_spans, maximal_spans, merged, span_rarity

def test_maximal_spans_drop_the_spans_inside_longer_ones():
    # corpus "a b c d x a b y c d e", text "q a b c d e b y c d e z": "a b c d" (1-5), "c d e" (3-6), "b y c d e"
    # (6-11); "b c d" (2-5) lies inside the first
    assert maximal_spans(np.array([0, 4, 3, 3, 2, 1, 5, 4, 3, 2, 1, 0])) == [(1, 5), (3, 6), (6, 11)]
    assert maximal_spans(np.zeros(3, dtype=int)) == []


def test_rarity_is_minus_log10_of_the_unigram_probability_and_ranks_rare_spans_first():
    counts = np.array([1000, 1000, 1000, 1, 2, 5])
    assert span_rarity(counts, 10_000, 0, 3) == pytest.approx(3.0)  # (0.1)^3
    assert span_rarity(counts, 10_000, 3, 5) == pytest.approx(-math.log10(1e-4 * 2e-4))
    longest = np.array([3, 2, 1, 3, 2, 1])  # spans [0, 3) and [3, 6)
    kept = kept_spans(longest, counts, 10_000, min_words=2)
    assert [(s.start, s.end) for s in kept] == [(3, 6), (0, 3)]  # the rare one first, though no longer
    assert kept_spans(longest, counts, 10_000, min_words=4) == []


def test_merged_spans_join_overlaps_for_display():
    assert merged([(6, 10), (1, 5), (8, 11), (11, 12)]) == [(1, 5), (6, 12)]


def test_bm25_equals_lucene_s_formula_by_hand():
    docs = ["fox jumps", "the dog", "fox fox dog", ""]
    got = bm25_scores("fox", docs, k1=1.5, b=0.75)
    n, avgdl, df = 3, (2 + 2 + 3) / 3, 2  # the empty document is not in the collection
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def term(tf, dl):
        return idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl))

    assert got == pytest.approx([term(1, 2), 0.0, term(2, 3), 0.0], rel=1e-5)
    assert bm25_scores("cat", docs).tolist() == [0.0] * 4


def test_word_spans_are_the_words_characters_or_none_where_lowercasing_changes_them():
    from scoring.overlap.ngrams import word_spans, words

    assert word_spans("Hi, big world!") == [(0, 2), (4, 7), (8, 13)]
    assert word_spans("Hi, big world!", 2) == [(0, 2), (4, 7)]
    assert len(words("İstanbul")) == 2 and word_spans("İstanbul") is None  # "i̇stanbul": the dot is no \w
    assert word_spans("café naïve") == [(0, 4), (5, 10)]
