"""The n-gram engine against hand-worked examples and a plain-Python reference."""
from __future__ import annotations

import random

import numpy as np
import pytest

from scoring.overlap import ngrams
from scoring.overlap.ngrams import (BYTE_BASE, MULTIPLIER, NgramSet, batch_hits, batch_ngrams, batch_words, contains,
                                    longest_run, text_ngrams, window_hashes, word_hashes, words)

MOD = 1 << 64


def reference_word(w: str) -> int:
    """A word's hash in Python integers: the polynomial over its code points, then splitmix64's finaliser."""
    h = 0
    for ch in w:
        h = (h * BYTE_BASE + ord(ch)) % MOD
    h ^= h >> 30
    h = (h * 0xBF58476D1CE4E5B9) % MOD
    h ^= h >> 27
    h = (h * 0x94D049BB133111EB) % MOD
    return h ^ (h >> 31)


def reference_hash(ws: list[str]) -> int:
    """The polynomial n-gram hash in Python integers: Σ h(w_i)·P^(n-1-i) mod 2^64."""
    out = 0
    for w in ws:
        out = (out * int(MULTIPLIER) + reference_word(w)) % MOD
    return out


def test_word_hashes_equal_the_reference_in_python_integers():
    ws = ["the", "a", "naïve", "ünïcode", "x" * 300, "_", "2024"]
    assert word_hashes(ws).tolist() == [reference_word(w) for w in ws]


@pytest.mark.parametrize("alphabet", ["ascii", "unicode"])
def test_the_byte_table_path_and_the_python_path_give_the_same_words(alphabet):
    """The code-point tables split a batch into exactly the words re's \\w finds (ASCII and any other script)."""
    rng = random.Random(5)
    chars = "aZ_9 .,-\n\t'" + ("éÉßİΣς中—’\u0301٣" if alphabet == "unicode" else "")
    texts = ["".join(rng.choice(chars) for _ in range(rng.randint(0, 80))) for _ in range(200)]
    hashes, counts = batch_words(texts)
    expected = [word_hashes(words(t)) for t in texts]
    assert counts.tolist() == [len(e) for e in expected]
    assert hashes.tolist() == np.concatenate(expected).tolist()


def test_long_texts_are_hashed_in_pieces_with_the_same_result(monkeypatch):
    text = " ".join(f"w{i % 97}" for i in range(5000))
    whole = batch_words([text])[0]
    monkeypatch.setattr(ngrams, "CHUNK", 1000)
    assert batch_words([text])[0].tolist() == whole.tolist()


def test_ngram_set_agrees_with_a_python_set():
    rng = np.random.default_rng(1)
    members = rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64)
    queries = np.concatenate([members[:2000], rng.integers(0, 2**63, 20000, dtype=np.int64).astype(np.uint64)])
    got = NgramSet(members).contains(queries)
    assert got.tolist() == [q in set(members.tolist()) for q in queries.tolist()]


def test_words_are_lowercased_word_runs_so_punctuation_and_case_do_not_hide_a_copy():
    assert words("The QUICK, brown-fox's  jump!\n(1999)") == ["the", "quick", "brown", "fox", "s", "jump", "1999"]
    assert words("Ünïcode café naïve") == ["ünïcode", "café", "naïve"]
    assert words("...") == []


def test_window_hashes_equal_the_polynomial_computed_by_hand():
    ws = words("one two three four five")
    got = window_hashes(word_hashes(ws), 3)
    assert got.dtype == np.uint64 and got.tolist() == [reference_hash(ws[i:i + 3]) for i in range(3)]
    assert window_hashes(word_hashes(ws), 5).tolist() == [reference_hash(ws)]
    assert window_hashes(word_hashes(ws), 6).size == 0  # shorter than n: no n-gram


def test_order_matters_and_equal_ngrams_hash_equal():
    _, a = text_ngrams("a b c", 3)
    _, b = text_ngrams("c b a", 3)
    _, c = text_ngrams("A, B; C.", 3)
    assert a[0] != b[0] and a[0] == c[0]


def test_a_batch_gives_each_texts_ngrams_and_none_across_a_boundary():
    texts = ["x y", "z w v", "", "p q r s"]
    grams, owner = batch_ngrams(texts, 3)
    expected = [(i, g) for i, t in enumerate(texts) for g in text_ngrams(t, 3)[1].tolist()]
    assert list(zip(owner.tolist(), grams.tolist())) == expected
    assert len(expected) == 3  # "z w v" once, "p q r s" twice; "x y z" (across texts 0 and 1) never


def test_contains_and_longest_run():
    table = np.array([3, 8, 20], dtype=np.uint64)
    assert contains(table, np.array([8, 9, 20, 0], dtype=np.uint64)).tolist() == [True, False, True, False]
    assert contains(np.zeros(0, np.uint64), np.array([1], np.uint64)).tolist() == [False]
    assert longest_run(np.array([1, 1, 0, 1, 1, 1, 0], bool)) == (3, 3)
    assert longest_run(np.array([0, 0], bool)) == (0, 0)
    assert longest_run(np.array([1, 1, 0, 1, 1], bool)) == (0, 2)  # the first of equal runs


def test_the_word_table_is_re_s_word_class_on_every_code_point():
    """Every code point, surrogates included, is a word character exactly when re's \\w says so."""
    import re

    ngrams._fill(range(len(ngrams._FILLED)))
    everything = "".join(map(chr, range(0x110000)))
    expected = np.zeros(0x110000, dtype=bool)
    expected[[m.start() for m in re.finditer(r"\w", everything)]] = True
    assert np.array_equal(ngrams._WORD_TABLE, expected)


UNICODE_PIECES = ["word", "İstanbul", "ΣΟΦΙΑΣ", "σοφίας", "nai\u0308ve", "e\u0301t\u00e9", "x_y", "__", "٣٤٥", "१२३",
                  "中文字符", "日本語", "한국어", "🙂", "a🙂b", "ǅungla", "Ⅻ", "½", "²", "foo‿bar", "ﬁne", "ＡＢＣ", "ß",
                  "ǰ", "\u00ad", "don’t", "l'été", "123abc", "ᾈ", "K", "Å", "\u2028", "\U00010400", "\U0001D7D8",
                  "\U00020000", "ꙮ", "अब", "ناس", "עברית", "\x00", "\ud800", "a\udfffb", "ΌΣ.", "Σ", "\u0345", "\u1e9e"]


def test_batch_words_are_re_s_words_on_random_unicode_text():
    """The words (their count, and the hash of each) of batches of random text drawn from every plane and from the
    hard cases (combining marks, other scripts' digits, underscores, CJK, emoji, letters past the BMP, final sigma,
    'İ' whose lowercase is two code points, NUL, lone surrogates) equal re's \\w+ words of the lowercased text."""
    rng = random.Random(11)
    for _ in range(20):
        texts = []
        for _ in range(rng.randint(1, 40)):
            parts = [rng.choice(UNICODE_PIECES) if rng.random() < 0.6 else
                     chr(rng.choice([rng.randrange(0x80), rng.randrange(0x10000), rng.randrange(0x110000)]))
                     for _ in range(rng.randint(0, 30))]
            texts.append("".join(p + rng.choice(["", " ", ",", "\n", "-"]) for p in parts))
        hashes, counts = batch_words(texts)
        expected = [words(t) for t in texts]
        assert counts.tolist() == [len(e) for e in expected]
        assert hashes.tolist() == [reference_word(w) for e in expected for w in e]


def test_an_ascii_batch_and_a_wider_one_hash_alike():
    """One byte a code point for an ASCII batch, two for one within the BMP, four otherwise: the same words hash
    the same, and lowering the batch at once (or text by text, once 'İ' grows) splits it at the same places."""
    ascii_text = "The quick brown fox, 2024_x!"
    base = batch_words([ascii_text])[0].tolist()
    for wider in ("é", "\u2014dash", "\U0001f600x", "\ud800", "İ"):
        hashes, counts = batch_words([ascii_text, wider, ascii_text])
        assert hashes.tolist()[:len(base)] == base == hashes.tolist()[-len(base):]
        assert counts.tolist() == [len(base), len(words(wider)), len(base)]
        assert hashes.tolist()[len(base):-len(base)] == [reference_word(w) for w in words(wider)]
    assert ngrams._code_points("é\u2014").dtype == np.uint16 and ngrams._code_points("é\U0001f600").dtype == np.uint32


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 13, 20])
def test_window_hashes_equal_horner_in_python_integers_for_every_n(n, monkeypatch):
    """Windows are spans of a scaled prefix sum (n > 3): equal to the polynomial computed by hand, also when the
    words are cut into pieces."""
    rng = np.random.default_rng(n)
    hashes = rng.integers(0, 2**63, 300, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(rng.integers(2))
    expected = []
    for i in range(len(hashes) - n + 1):
        h = 0
        for x in hashes[i:i + n].tolist():
            h = (h * int(MULTIPLIER) + x) % MOD
        expected.append(h)
    assert window_hashes(hashes, n).tolist() == expected
    monkeypatch.setattr(ngrams, "CHUNK", 7)
    assert window_hashes(hashes, n).tolist() == expected


def test_batch_hits_are_the_members_among_batch_ngrams():
    rng = random.Random(2)
    vocab = [f"w{i}" for i in range(12)]
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(0, 30))) for _ in range(60)]
    grams, owner = batch_ngrams(texts, 3)
    members = NgramSet(grams[::5])
    hashes, docs, positions = batch_hits(texts, 3, members)
    keep = members.contains(grams)
    assert hashes.tolist() == grams[keep].tolist() and docs.tolist() == owner[keep].tolist()
    assert positions == grams.size


def test_contains_on_many_queries_sorts_them_and_answers_in_their_order():
    rng = np.random.default_rng(4)
    table = np.unique(rng.integers(0, 2**63, 3000, dtype=np.int64).astype(np.uint64))
    queries = np.concatenate([table[::2], rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64)])
    rng.shuffle(queries)
    members = set(table.tolist())
    assert contains(table, queries).tolist() == [q in members for q in queries.tolist()]
