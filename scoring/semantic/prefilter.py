"""The cheap first stage of `overlap --semantic`: which corpus windows are worth embedding at all.

Embedding every window is what decides whether a semantic scan of a large corpus runs on CPUs (all-MiniLM-L6-v2:
about 55 windows of 58 words a second on one thread, bench/results/semantic_study.md). Reading a window's numbers
and words costs well under a millisecond, so windows that cannot be flagged are dropped before the embedder sees
them.

Why it costs no flag of an item with anchors: an item that does not abstain is flagged on a window only when the
verifier's weighted recall there reaches the threshold (calibrate.decision_score). A window whose recall for every
such item is below `bar` can therefore never be the window a flag rests on while the threshold is >= bar, and
removing windows only moves the others up an item's ranking, so a window that was in an item's top k stays there.
Dropping them loses no flag; the decision can only rise (an item now sees candidates that were ranked below k), and
that holds for the null's items too, so a threshold calibrated with the prefilter on is calibrated for it.

What it cannot promise:
- items that abstain (their anchors weigh < verify.MIN_WEIGHT) are flagged on the cosine alone. For them a window is
  kept when it shares any one anchor, rare words included (a near-identical passage shares its topic words). A
  passage that shares none, a translation into another script, is lost: measured in the study;
- items with no anchor at all ("Why is the sky blue?" has none under the default rare-word cut) keep nothing;
  they are counted (`uncovered`) and reported, and `--prefilter` should not be used for a benchmark made of them.

The window's recall for an item is the verifier's (the same weights and the same matching, verify.occurs), found
through an inverted index from anchor to item, so a window costs a lookup per distinct word. Three exceptions err
toward keeping, each only raising a window's recall above the verifier's: a code anchor that is not one word (a
string literal with spaces) is matched by substring in verify, and is counted here as present in every window; a
name of several words ("North Fork") is found in verify when all its words are, and here each word brings its share
of the name's weight; an item with two names or more and numbers that weigh MIN_WEIGHT may have one missing name
forgiven (verify.forgives_a_name), and here that name's weight is counted as present everywhere.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from scoring.overlap.ngrams import WORD
from scoring.semantic.anchors import Anchors
from scoring.semantic.verify import MIN_WEIGHT, WEIGHTS, WindowTerms, weighted_anchors

DEFAULT_BAR = 0.5  # well below any threshold the study's nulls set (0.9-1.0), so no flag is lost


@dataclass(frozen=True)
class PrefilterStats:
    windows: int
    kept: int
    uncovered_items: int  # items with no anchor: the prefilter keeps nothing for them

    @property
    def kept_share(self) -> float | None:
        return self.kept / self.windows if self.windows else None


class Prefilter:
    """Built once from the queries' anchors (benchmark-sized), then asked about windows one at a time."""

    def __init__(self, items: Sequence[Anchors], bar: float = DEFAULT_BAR):
        if not 0.0 < bar <= 1.0:
            raise ValueError(f"the prefilter's bar is a share of an item's anchor weight in (0, 1], got {bar}")
        self.bar = bar
        # key -> [(item, weight)]: numbers under ("n", value), every other anchor under ("w", lowercased word)
        self.index: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
        self.need = np.zeros(len(items))  # the weight a window must reach for each checkable item
        self.total = np.zeros(len(items))  # each item's anchor weight (verify.item_weight)
        self.free = np.zeros(len(items))  # weight counted as present everywhere (multi-word code anchors)
        self.abstaining: set[int] = set()
        self.uncovered = 0
        for i, item in enumerate(items):
            total = numbers = 0.0
            keys = []
            for kind, a, w in weighted_anchors(item):
                total += w
                if kind == "numbers":
                    keys.append((("n", a), w))
                    numbers += w
                elif kind == "code" and not WORD.fullmatch(a):
                    self.free[i] += w
                elif kind == "entities" and " " in a:
                    parts = a.lower().split()
                    keys += [(("w", p), w / len(parts)) for p in parts]
                else:
                    keys.append((("w", a.lower()), w))
            if len(item.entities) >= 2 and numbers >= MIN_WEIGHT:  # a name the verifier may forgive
                self.free[i] += WEIGHTS["entities"]
            if not keys and not self.free[i]:
                self.uncovered += 1
                self.need[i] = np.inf
                continue
            self.total[i] = total
            if total < MIN_WEIGHT:
                self.abstaining.add(i)
            self.need[i] = bar * total if total else np.inf
            for key, w in keys:
                self.index[key].append((i, w))
        self.always = bool(np.any(self.free >= self.need))  # a literal-heavy item keeps every window

    def found(self, terms: WindowTerms) -> dict[int, float]:
        """item -> the weight of its anchors this window holds, from above (multi-word code literals and a name the
        verifier may forgive counted as present, a name of several words by its words' shares: module docstring),
        for every item that shares at least one anchor with the window."""
        got: dict[int, float] = defaultdict(float)
        for key in [("n", n) for n in terms.numbers] + [("w", w) for w in terms.words]:
            for i, w in self.index.get(key, ()):
                got[i] += w
        return {i: g + self.free[i] for i, g in got.items()}

    def keep(self, terms: WindowTerms) -> bool:
        """Whether some item could be flagged on this window (module docstring)."""
        if self.always:
            return True
        got = self.found(terms)
        return any(i in self.abstaining or g >= self.need[i] for i, g in got.items())

    def mask(self, texts: Iterable[str]) -> np.ndarray:
        return np.fromiter((self.keep(WindowTerms.of(t)) for t in texts), dtype=bool)

    def stats(self, mask: np.ndarray) -> PrefilterStats:
        return PrefilterStats(int(mask.size), int(mask.sum()), self.uncovered)
