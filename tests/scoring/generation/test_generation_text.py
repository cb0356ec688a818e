"""The text measures of the generation detectors, against values worked out by hand. No model, no server."""
from __future__ import annotations

import zlib

import pytest

from scoring.generation.text import (coverage, covered_mask, covered_spans, creativity_index, rouge1_recall,
                                     split_passage, tokens, zlib_size)


def test_the_cut_keeps_the_text_as_written():
    prompt, ref, keep = split_passage("The cat  sat on\nthe mat today.", 0.5)
    # 7 words: int(7 * 0.5) = 3 in the prompt, the rest (with its own spacing) is the reference
    assert (prompt, ref, keep) == ("The cat  sat", "on\nthe mat today.", 3)
    assert split_passage("one two", 0.9) == ("one", "two", 1)  # at least one word on each side
    assert split_passage("one two", 0.0) == ("one", "two", 1)
    assert split_passage("alone", 0.5) == ("", "", 0)


def test_tokens_split_punctuation_fold_accents_and_keep_case():
    assert tokens("Café don't stop, Naïve!") == ["Cafe", "don't", "stop", ",", "Naive", "!"]


def test_coverage_by_hand():
    gen = "the cat sat on the mat and then the dog"
    ref = "cat sat on the mat while the dog slept"
    # runs of >= 3 tokens of gen found in ref: "cat sat on the mat" (tokens 1-5); "the dog" is only 2 long
    assert covered_mask(tokens(gen), tokens(ref), 3) == [False, True, True, True, True, True, False, False, False,
                                                          False]
    assert coverage(gen, ref, 3) == pytest.approx(5 / 10)
    assert coverage(gen, ref, 2) == pytest.approx(7 / 10)  # + "the dog"
    assert coverage(gen, ref, 6) == 0.0
    assert coverage("cat sat", ref, 3) == 0.0  # shorter than n: 0, as the reference code's too_short
    assert coverage("", ref, 3) == 0.0


def test_coverage_is_case_sensitive_and_token_level():
    ref = "bathe cat sat on it"
    assert coverage("the cat sat", ref, 3) == 0.0  # "the" is not "bathe": no match inside a word
    assert coverage("The Cat Sat", "the cat sat", 3) == 0.0


def test_unique_counts_a_repeated_run_once():
    ref = "a b c d"
    gen = "a b c x a b c"
    assert coverage(gen, ref, 3) == pytest.approx(6 / 7)
    assert coverage(gen, ref, 3, unique=True) == pytest.approx(3 / 7)


def test_creativity_index_sums_coverage_over_n():
    gen = "the cat sat on the mat and then the dog"
    ref = "cat sat on the mat while the dog slept"
    # n=2: 7/10; n=3,4,5: 5/10 each ("cat sat on the mat" is 5 long); n>=6: 0
    assert creativity_index(gen, ref, 2, 12) == pytest.approx(0.7 + 0.5 * 3)
    assert creativity_index(gen, ref, 3, 4) == pytest.approx(1.0)


def test_covered_spans_are_character_spans_of_the_generation():
    gen = "the cat sat on the mat and then the dog"
    spans = covered_spans(gen, "cat sat on the mat while", 3)
    assert [gen[a:b] for a, b in spans] == ["cat sat on the mat"]


def test_rouge1_recall_by_hand():
    # clipped counts: b twice in the candidate, three times in the reference → 2 of the reference's 4 words
    assert rouge1_recall("a b b c", "b b b d") == pytest.approx(2 / 4)
    assert rouge1_recall("The cat.", "the cat") == pytest.approx(0.0)  # case and punctuation are kept
    assert rouge1_recall("", "a b") == 0.0
    assert rouge1_recall("a b", "") == 0.0


def test_zlib_size_is_the_compressed_words():
    assert zlib_size("a  b\nc") == len(zlib.compress(b"a b c"))
