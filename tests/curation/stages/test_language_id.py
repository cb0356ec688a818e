"""The Language stage's classifier (curation/stages/language_id.py) scores exactly as py3langid's stock one."""
from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest
from py3langid.langid import MODEL_FILE, LanguageIdentifier

from curation.stages.language_id import WideTableIdentifier, identifier

SAMPLES = [
    "", " ", "\n\n", "a", "COFFEE", "I just got a pound of microroasted, local coffee.",
    "Le café est une boisson obtenue à partir des graines torréfiées du caféier.",
    "Kaffee ist ein schwarzes, psychotrop wirkendes Heißgetränk aus Kaffeebohnen.",
    "Кофе — напиток, приготовляемый из жареных зёрен кофейного дерева.",
    "咖啡是用经过烘焙的咖啡豆制作出来的饮料。", "コーヒーはコーヒー豆を焙煎して作る飲み物です。",
    "القهوة مشروب يُعد من بذور البن المحمصة.", "El café es una bebida que se obtiene de las semillas tostadas.",
    "ΚΑΦΕΣ ΕΙΝΑΙ ΡΟΦΗΜΑ", "def f(x):\n    return x ** 2  # code, not prose", "1234 5678 90 %$#@!",
    "emoji 😀☕ and combining é vs é", "\x00\x01 control \ufffd replacement",
]


def _stock() -> LanguageIdentifier:
    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def _texts(shared_data=None) -> list[str]:
    rng = random.Random(0)
    texts = list(SAMPLES)
    alphabet = "abcdefghijklmnopqrstuvwxyz  éüßçøñ.,;!?-\nЖжщφλ中文字😀"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 600))) for _ in range(60)]
    texts += [bytes(rng.randrange(256) for _ in range(300)).decode("latin-1") for _ in range(20)]
    return texts


def _assert_same(texts: list[str]) -> None:
    stock, wide = _stock(), identifier()
    for text in texts:
        a, b = stock._decide(text), wide._decide(text)
        assert a.dtype == b.dtype and np.array_equal(a, b), text[:80]
        assert stock.classify(text) == wide.classify(text)
        assert stock.rank(text) == wide.rank(text)


def test_scores_are_bit_identical_to_py3langid_on_samples_and_noise():
    _assert_same(_texts())


def test_scores_are_bit_identical_on_real_text(shared_data):
    from curation.sources.stackexchange.posts import body_text
    from curation.sources.stackexchange.rows import row_attributes

    coffee = shared_data / "stackexchange" / "coffee.stackexchange.com" / "Posts.xml"
    texts = []
    with open(coffee, "rb") as fh:
        for line in fh:
            row = row_attributes(line)
            if row:
                texts += [body_text(row.get("Body", ""))[0], row.get("Title", "")]
    with open(shared_data / "wikimia" / "WikiMIA_length128.jsonl", encoding="utf-8") as fh:
        texts += [json.loads(line)["input"] for line in fh][:300]
    assert len(texts) > 1400
    _assert_same(texts)


def test_restricting_languages_keeps_the_scores_equal():
    stock, wide = _stock(), WideTableIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    for ident in (stock, wide):
        ident.set_languages(["en", "fr", "de"])
    for text in SAMPLES[:8]:
        assert np.array_equal(stock._decide(text), wide._decide(text))
        assert stock.classify(text) == wide.classify(text)


@pytest.mark.parametrize("text", ["", "   "])
def test_featureless_text_is_scored_as_the_library_does(text):
    assert identifier().classify(text) == _stock().classify(text)


def test_the_automaton_steps_to_the_longest_suffix():
    """What makes the numpy walk (WideTableIdentifier._features) meet the features of py3langid's walk on every
    text: each state stands for one string (the breadth-first path to it, at most `_depth` bytes), and every step
    from a state on a byte goes to the state of the longest string that ends the state's string plus that byte (the
    Aho-Corasick rule: the step itself when that is a state's string, else the step from the state of the longest
    proper suffix). Then the state after any text is the state of the longest string ending the text, which only its
    last `_depth` bytes decide. Checked for every state and byte of the bundled model."""
    ident = identifier()
    moves, base = ident._moves, ident._base
    states, byte = len(base), np.arange(256)
    depth, code = np.full(states, -1), np.zeros(states, dtype=np.uint64)
    depth[0], frontier, level = 0, np.zeros(1, dtype=np.int64), 0
    while len(frontier):
        targets = moves[base[frontier][:, None] + byte]
        parent, letter = np.nonzero(depth[targets] < 0)
        new, first = np.unique(targets[parent, letter], return_index=True)
        level += 1
        depth[new] = level
        code[new] = (code[frontier[parent[first]]] << np.uint64(8)) | letter[first].astype(np.uint64)
        frontier = new.astype(np.int64)
    assert (depth >= 0).all() and depth.max() == ident._depth == 6
    keys = (depth.astype(np.uint64) << np.uint64(48)) | code  # a string as (length, bytes): one key per state
    order = np.argsort(keys)
    sorted_keys = keys[order]
    assert len(np.unique(keys)) == states

    def state_of(key):  # the state whose string has this key, or -1
        at = np.minimum(np.searchsorted(sorted_keys, key), states - 1)
        return np.where(sorted_keys[at] == key, order[at], -1)

    fail = np.zeros(states, dtype=np.int64)  # the state of the longest proper suffix that is a state's string
    for length in range(1, ident._depth):
        longer = np.nonzero(depth > length)[0]
        suffix = state_of((np.uint64(length) << np.uint64(48)) | (code[longer] & np.uint64((1 << 8 * length) - 1)))
        fail[longer[suffix >= 0]] = suffix[suffix >= 0]
    for lo in range(0, states, 8192):
        s = np.arange(lo, min(states, lo + 8192))
        step = moves[base[s][:, None] + byte]
        child = state_of(((depth[s] + 1).astype(np.uint64) << np.uint64(48))[:, None]
                         | (code[s][:, None] << np.uint64(8)) | byte.astype(np.uint64))
        child[depth[s] >= ident._depth] = -1  # no string is longer
        via_fail = np.where(s[:, None] == 0, 0, moves[base[fail[s]][:, None] + byte])
        assert np.array_equal(step, np.where(child >= 0, child, via_fail)), lo


def test_the_walk_meets_the_librarys_features_in_order():
    from py3langid.langid import visit_counts

    ident = identifier()
    rng = random.Random(3)
    texts = [t.encode("utf-8", "surrogatepass") for t in _texts()]
    texts += [bytes(rng.randrange(256) for _ in range(n)) for n in (1, 2, 5, 6, 7, 50, 999)]
    for text in texts:
        stock = visit_counts(ident.tk_nextmove, ident._rowbase, ident.tk_output, text)
        ours = ident._features(text).tolist()
        assert stock == (Counter(ours) if ours else None) and (stock is None or list(stock) == list(Counter(ours)))
