"""The Language stage's classifier (curation/stages/language_id.py) scores exactly as py3langid's stock one."""
from __future__ import annotations

import json
import random

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
