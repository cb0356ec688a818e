"""Tag&Tab (Antebi et al., 2025): the log-likelihood of a text's keywords only.

Tag: split into sentences, drop those under `min_words` words, and per sentence pick the K words with the
highest word entropy E(w) = −p(w)·log2 p(w) (p from `wordfreq`), plus the named entities.
Tab: a word's log-likelihood is the log p of its first token given all preceding text, read from the one
forward pass over the whole text (the token-stats row). Score: per sentence the mean over its keywords, then
the mean over sentences.

Named entities come from spaCy's `en_core_web_sm` when it is installed (`pip install tidemark[ner]` plus the
model package). Without it, the documented fallback tags capitalised words that do not start a sentence —
a cheap proper-noun proxy. `ner="none"` disables entities; the choice is part of the column name.
If no sentence reaches `min_words`, all sentences are used rather than giving no score.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from scoring.detectors.base import register
from scoring.lm import ner as ner_rules
from scoring.lm.ner import WORD, spacy_pipeline


@functools.lru_cache(maxsize=200_000)
def word_entropy(word: str) -> float:
    from wordfreq import word_frequency

    p = word_frequency(word.lower(), "en")
    return -p * math.log2(p) if p > 0 else 0.0


def entity_spans(text: str, ner: str) -> list[tuple[int, int]]:
    """Character spans of named entities: spaCy when available (ner="auto"/"spacy"), else capitalised words."""
    if ner == "none":
        return []
    nlp = spacy_pipeline() if ner in ("auto", "spacy") else None
    if nlp is not None:
        return [(e.start_char, e.end_char) for e in nlp(text).ents]
    if ner == "spacy":
        raise RuntimeError("tag_tab ner=spacy asked for, but spaCy or en_core_web_sm is not installed")
    spans = []
    for sent in ner_rules.sentences(text):
        for k, m in enumerate(WORD.finditer(text, sent[0], sent[1])):
            if k > 0 and m.group()[0].isupper():
                spans.append((m.start(), m.end()))
    return spans


def token_at(offsets: np.ndarray, char: int) -> int:
    """Index of the token covering character `char`: the last token starting at or before it."""
    return int(np.searchsorted(offsets, char, side="right") - 1)


def tag_tab_score(text: str, offsets: np.ndarray, lp: np.ndarray, first_predicted: int, k: int,
                  min_words: int, ner: str) -> float:
    if not text or offsets is None or not len(lp):
        return float("nan")
    sentences = [[m for m in WORD.finditer(text, a, b)] for a, b in ner_rules.sentences(text)]
    long_enough = [s for s in sentences if len(s) >= min_words]
    sentences = long_enough or [s for s in sentences if s]
    entities = entity_spans(text, ner)
    sentence_scores = []
    for words in sentences:
        chosen = set(sorted(range(len(words)), key=lambda i: -word_entropy(words[i].group()))[:k])
        chosen |= {i for i, w in enumerate(words) if any(a <= w.start() < b for a, b in entities)}
        lls = []
        for i in sorted(chosen):
            pos = token_at(offsets, words[i].start()) - first_predicted
            if 0 <= pos < len(lp):  # the text's very first token has no prediction
                lls.append(lp[pos])
        if lls:
            sentence_scores.append(float(np.mean(lls)))
    return float(np.mean(sentence_scores)) if sentence_scores else float("nan")


@register("tag_tab", k=4, min_words=7, ner="auto")
def tag_tab(stats, views, k, min_words, ner):
    """Mean over sentences of the mean log-likelihood of each sentence's K highest-entropy words + entities."""
    return np.array([
        tag_tab_score(t, o, lp, f, k, min_words, ner)
        for t, o, lp, f in zip(stats.texts, stats.offsets, stats.lp, stats.first_predicted)
    ])
