"""The spans of a text that occur verbatim in a corpus, from the longest match at each word (pure functions).

A text is a sequence of words (lowercased `\\w+`, as `tidemark overlap` matches). `longest[i]` is the length of the
longest run of words starting at word i that occurs somewhere in the corpus (0: word i itself does not occur). A
*maximal* span is one no longer occurring span contains: [i, i + longest[i]) where it ends after every span that
starts before it (longest[i + 1] >= longest[i] - 1 holds for any corpus, so the ends never go back).

Rarity follows OLMoTrace (Liu et al. 2025): the span's unigram probability, the product of its words' corpus
frequencies, is how likely the span is to occur by chance word by word; a long span of common words ("one of the
most important of the") is weaker evidence than a shorter span of rare ones. `rarity` is -log10 of that
probability (higher: rarer, ranked first).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Span:
    start: int  # first word (offset in the text's words)
    end: int  # one past the last word
    rarity: float  # -log10 of the span's unigram probability

    @property
    def words(self) -> int:
        return self.end - self.start


def maximal_spans(longest: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of every maximal occurring span, in text order."""
    out: list[tuple[int, int]] = []
    reach = 0
    for i, n in enumerate(np.asarray(longest).tolist()):
        if n and i + n > reach:
            out.append((i, i + n))
            reach = i + n
    return out


def span_rarity(unigram_counts: np.ndarray, total_tokens: int, start: int, end: int) -> float:
    """-log10 of the product of the words' corpus frequencies count/total (every word of a span occurs, so no count
    is 0)."""
    counts = np.asarray(unigram_counts[start:end], dtype=np.float64)
    return float(-np.sum(np.log10(counts / float(total_tokens))))


def kept_spans(longest: np.ndarray, unigram_counts: np.ndarray, total_tokens: int, min_words: int) -> list[Span]:
    """The maximal spans of at least `min_words` words, rarest first (ties: longer, then earlier)."""
    spans = [Span(s, e, span_rarity(unigram_counts, total_tokens, s, e)) for s, e in maximal_spans(longest)
             if e - s >= min_words]
    return sorted(spans, key=lambda sp: (-sp.rarity, -sp.words, sp.start))


def merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching [start, end) intervals joined, in text order (how a page highlights them)."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]
