"""Overlap answers per row, by hand and against a plain-Python set scan."""
from __future__ import annotations

import math
import random

import pytest

from scoring.overlap.matching import BenchmarkGrams, FoundNgrams, Matches, row_results, scan_texts
from scoring.overlap.ngrams import text_ngrams, words


def answers(bench_texts, corpus, n=3, **kw):
    bench = BenchmarkGrams.of([{"id": f"r{i}", "input": t} for i, t in enumerate(bench_texts)], n)
    return row_results(bench, scan_texts(bench, corpus, [f"d{i}" for i in range(len(corpus))]), **kw)


def test_a_hand_worked_row():
    """9 words -> 7 trigrams; the corpus (other case and punctuation) has 3 of them in a row: share 3/7, longest
    match 3 + 3 - 1 = 5 words."""
    [r] = answers(["The quick brown fox jumps over the lazy dog."], ["A QUICK, brown fox! jumps over a lazy dog"])
    assert (r["n_ngrams"], r["n_matched"]) == (7, 3)
    assert r["share"] == pytest.approx(3 / 7)
    assert r["longest_match_words"] == 5 and r["snippet"] == "quick brown fox jumps over"
    assert r["contaminated"] and r["sources"] == ["d0"] and r["corpus_occurrences"] == 3


def test_repeated_ngrams_count_per_position_and_short_rows_are_not_checked():
    repeat, short, clean = answers(["a b c a b c", "two words", "x y z"], ["a b c", "x y", "z"])
    assert (repeat["n_ngrams"], repeat["n_matched"], repeat["share"]) == (4, 2, 0.5)  # abc at positions 0 and 3
    assert repeat["corpus_occurrences"] == 1  # one distinct matched trigram, found once
    assert short["n_ngrams"] == 0 and short["share"] is None and not short["contaminated"]
    assert clean["share"] == 0.0 and not clean["contaminated"]  # "x y" + "z" are two documents, not one text


def test_threshold_and_sources_in_corpus_order_capped():
    row = "one two three four five six"
    corpus = [f"noise {i}" for i in range(5)] + [row] * 15
    [r] = answers([row], corpus, max_sources=4)
    assert r["sources"] == ["d5", "d6", "d7", "d8"] and r["corpus_occurrences"] == 15 * 4
    [r] = answers([row], ["one two three"], threshold=0.5)
    assert r["share"] == 0.25 and not r["contaminated"]


def test_parts_merge_in_part_order_like_one_scan():
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(50)]
    bench_texts = [" ".join(rng.choice(vocab) for _ in range(12)) for _ in range(20)]
    corpus = [" ".join(rng.choice(vocab) for _ in range(60)) for _ in range(40)] + bench_texts[:5]
    bench = BenchmarkGrams.of([{"id": str(i), "input": t} for i, t in enumerate(bench_texts)], 3)
    ids = [f"d{i}" for i in range(len(corpus))]
    whole = scan_texts(bench, corpus, ids)
    merged = Matches()
    for lo in range(0, len(corpus), 7):
        merged.merge(Matches.from_table(scan_texts(bench, corpus[lo:lo + 7], ids[lo:lo + 7]).to_table()))
    assert row_results(bench, merged) == row_results(bench, whole)


def test_equals_a_plain_python_set_scan():
    """The reference: every benchmark n-gram as a tuple in a set, every corpus n-gram looked up one by one."""
    rng = random.Random(7)
    vocab = [f"t{i}" for i in range(30)]
    bench_texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(2, 25))) for _ in range(60)]
    corpus = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 80))) for _ in range(80)]
    n = 4
    found = set()
    for doc in corpus:
        w = words(doc)
        found.update(tuple(w[i:i + n]) for i in range(len(w) - n + 1))
    for text, r in zip(bench_texts, answers(bench_texts, corpus, n=n)):
        w = words(text)
        grams = [tuple(w[i:i + n]) for i in range(len(w) - n + 1)]
        hits = [g in found for g in grams]
        assert r["n_ngrams"] == len(grams) and r["n_matched"] == sum(hits)
        best = run = 0
        for h in hits:
            run = run + 1 if h else 0
            best = max(best, run)
        assert r["longest_match_words"] == (best + n - 1 if best else 0)


def test_the_audit_s_document_overlap_is_exact_and_ignores_case_and_punctuation():
    """What `audit --reference-corpus` records per document (FoundNgrams: the audited n-grams a scan found)."""
    ref = "The quick brown fox jumps over the lazy dog, and then it runs far away from the farm."
    query = "THE QUICK brown fox -- jumps over; something else entirely here now."
    bench = BenchmarkGrams.of([{"id": "q", "input": query}, {"id": "s", "input": "too short"}], 5)
    found = FoundNgrams.of(scan_texts(bench, [ref], ["r"]), 5)
    ov = found.overlap(query)
    # 5-grams of the query: 11 words → 7; 'the quick brown fox jumps' and 'quick brown fox jumps over' match
    assert (ov["n_ngrams"], ov["n_matched"]) == (7, 2)
    assert ov["share"] == pytest.approx(2 / 7)
    assert ov["examples"] == ["the quick brown fox jumps"]  # non-overlapping examples only
    assert math.isnan(found.overlap("too short")["share"])


def test_sources_are_the_first_distinct_ids_in_corpus_order_however_the_batches_are_cut():
    """Two records with the same id are one source; an n-gram's first max_sources distinct ids do not depend on where
    batches or parts are cut (the previous engine lost 'B' when both 'A' records fell in one batch)."""
    bench = BenchmarkGrams.of([{"id": "r", "input": "a b c d"}], 3)
    corpus, ids = ["a b c", "a b c", "x", "a b c", "a b c", "a b c"], ["A", "A", "C", "B", "A", "D"]
    for batch in (1, 2, 3, 6):
        [r] = row_results(bench, scan_texts(bench, corpus, ids, batch=batch), max_sources=2)
        assert r["sources"] == ["A", "B"] and r["corpus_occurrences"] == 5
    merged = Matches(2)
    for lo in range(0, len(corpus), 2):  # parts: the same id in two parts is one source too
        merged.merge(Matches.from_table(scan_texts(bench, corpus[lo:lo + 2], ids[lo:lo + 2]).to_table()))
    assert row_results(bench, merged, max_sources=2)[0]["sources"] == ["A", "B"]


def test_parts_with_repeated_ids_merge_like_one_scan():
    rng = random.Random(8)
    vocab = [f"w{i}" for i in range(8)]
    bench_texts = [" ".join(rng.choice(vocab) for _ in range(10)) for _ in range(15)]
    corpus = [" ".join(rng.choice(vocab) for _ in range(40)) for _ in range(90)]
    ids = [f"d{rng.randrange(30)}" for _ in corpus]  # every id several times
    bench = BenchmarkGrams.of([{"id": str(i), "input": t} for i, t in enumerate(bench_texts)], 3)
    whole = scan_texts(bench, corpus, ids, batch=7)
    merged = Matches()
    for lo in range(0, len(corpus), 11):
        merged.merge(Matches.from_table(scan_texts(bench, corpus[lo:lo + 11], ids[lo:lo + 11], batch=4).to_table()))
    assert row_results(bench, merged) == row_results(bench, whole)
    expected: dict[int, list[str]] = {}
    for doc, i in zip(corpus, ids):  # the definition, one document at a time
        for h in dict.fromkeys(text_ngrams(doc, 3)[1].tolist()):
            if h in whole.count and len(expected.setdefault(h, [])) < 10 and i not in expected[h]:
                expected[h].append(i)
    assert whole.sources == expected


def test_first_distinct_plain_equals_the_general_ranking():
    """The one-sort path (documents in order, one id each) keeps what the two-sort path keeps."""
    import numpy as np

    from scoring.overlap.found import first_distinct

    rng = np.random.default_rng(0)
    for _ in range(20):
        docs = np.sort(rng.integers(0, 40, 500))
        hashes = rng.integers(0, 30, 500).astype(np.uint64)
        keys = docs * 7 + 3  # one key per document
        for cap in (1, 3, 10):
            plain = first_distinct(hashes, docs, keys, cap, plain=True)
            general = first_distinct(hashes, docs, keys, cap)
            assert all(np.array_equal(a, b) for a, b in zip(plain, general))
