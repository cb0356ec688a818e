"""Named entities and sentences for the detectors that read them (Tag&Tab's keywords, name cloze's passages):
spaCy's `en_core_web_sm` where it is installed (`pip install tidemark[ner]` plus the model package), and the
plain sentence and word rules the fallbacks use."""
from __future__ import annotations

import functools
import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"[A-Za-z0-9][\w'’-]*")


@functools.lru_cache(maxsize=1)
def spacy_pipeline():
    """spaCy's small English pipeline (NER only), or None where spaCy or the model is not installed."""
    try:
        import spacy

        return spacy.load("en_core_web_sm", disable=["parser", "lemmatizer"])
    except Exception:  # noqa: BLE001 - any failure means "no NER available"
        return None


def sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the text's sentences (split after . ! ? and whitespace), empty ones left out."""
    spans, start = [], 0
    for m in SENTENCE_END.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [s for s in spans if text[s[0]: s[1]].strip()]
