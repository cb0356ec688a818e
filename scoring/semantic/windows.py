"""Corpus documents cut into word windows sized to the benchmark's items.

A rephrased item usually sits inside a longer document (a forum post, a worksheet, a page of solutions), and one
embedding of the whole document averages the item with everything around it. So a document is embedded as
overlapping windows of about twice an item's length, and an item is compared with each window.

Words here are whitespace-separated runs (`\\S+`): punctuation stays with its word, so a window's text is the original
passage as written (a report shows it), and an item's length is counted the same way (`word_count`).

Containment: windows of `size` w start every `stride` s words (the last one aligned to the document's end), so every
span of at most w - s + 1 consecutive words lies whole inside some window. (Take the last window starting at or
before the span's first word a: it starts at most s - 1 words before a, and it runs w words.) With the defaults
(size = 2 x the median item length, stride = size // 2) an item up to the median length, or a rephrase of about
that length, always has a window that holds all of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class WindowPlan:
    size: int  # words per window
    stride: int  # words between the starts of consecutive windows

    def __post_init__(self):
        if self.size < 1 or not 1 <= self.stride <= self.size:
            raise ValueError(f"need size >= 1 and 1 <= stride <= size, got size {self.size}, stride {self.stride}")

    @property
    def contained_span(self) -> int:
        """The longest span (in words) guaranteed to lie whole inside some window: size - stride + 1."""
        return self.size - self.stride + 1


@dataclass(frozen=True)
class Window:
    start_word: int  # index of the window's first word in the document
    n_words: int
    char_start: int  # the window is text[char_start:char_end] of the document
    char_end: int
    text: str


def word_count(text: str) -> int:
    """The number of words of a text as windows count them (whitespace-separated)."""
    return sum(1 for _ in WORD.finditer(text))


def window_plan(item_word_counts: Sequence[int], factor: float = 2.0, quantile: float = 0.5, min_words: int = 16,
                max_words: int = 256, stride: int | None = None) -> WindowPlan:
    """size = round(factor x the `quantile` of the items' word counts), clamped to [min_words, max_words];
    stride = size // 2 unless given. The quantile is numpy's (linear interpolation)."""
    counts = np.asarray(item_word_counts, dtype=np.float64)
    if not counts.size:
        raise ValueError("window_plan needs the word count of at least one item")
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words, got {min_words}, {max_words}")
    size = int(min(max_words, max(min_words, round(factor * float(np.quantile(counts, quantile))))))
    return WindowPlan(size, max(1, size // 2) if stride is None else stride)


def window_starts(n_words: int, plan: WindowPlan) -> list[int]:
    """The first word of each window of a document of n_words: 0, stride, 2 x stride, ... while a window ends before
    the document does, then one window ending at its last word (no tail lost). One window when the document is no
    longer than a window, none when it has no word."""
    if n_words <= 0:
        return []
    if n_words <= plan.size:
        return [0]
    last = n_words - plan.size
    starts = list(range(0, last, plan.stride))
    return starts + [last]  # range stops short of `last`: the aligned window is never a duplicate


def window_offsets(text: str, plan: WindowPlan) -> list[tuple[int, int, int, int]]:
    """(start_word, n_words, char_start, char_end) of each of the text's windows, without copying their text: a
    corpus part keeps its documents once and cuts a window's text only when it is embedded."""
    spans = [m.span() for m in WORD.finditer(text)]
    out = []
    for s in window_starts(len(spans), plan):
        e = min(s + plan.size, len(spans))
        out.append((s, e - s, spans[s][0], spans[e - 1][1]))
    return out


def cut_windows(text: str, plan: WindowPlan) -> list[Window]:
    """The text's windows, with their word and character positions; each window's text is the original substring
    (from its first word's first character to its last word's last)."""
    return [Window(s, n, lo, hi, text[lo:hi]) for s, n, lo, hi in window_offsets(text, plan)]
