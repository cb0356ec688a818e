"""The model-free verifier: does a corpus window hold what a benchmark item is about, by its anchors (anchors.py)?

A high cosine alone is not evidence. Under all-MiniLM-L6-v2, different GSM8K word problems scored 0.31-0.57 against
each other and a same-template sibling (other names, numbers and months) 0.51, while a French translation of the
item itself scored 0.36 and English rephrases 0.92-0.94 (a handful of hand-made pairs): the cosine ranks
candidates, it does not tell a rephrase from a sibling of the same style. A rephrase keeps the item's numbers,
names and rare words, which rarely all match between different problems, so a candidate found by embedding is
checked against the item's anchors.

The window is longer than the item (windows.py sizes it to about twice an item), so the measure is recall: the share
of the item's anchors that occur in the window, weighted by how unlikely each is to occur by chance. Precision (the
window's anchors found in the item) would punish the context around a copied item.

`score` = Σ weight of the item's anchors found in the window (plus a forgiven name's, below) / Σ weight of all of
them, in [0, 1].
`abstain` is True when the item's anchors weigh less than MIN_WEIGHT in all: too little to tell a rephrase from a
different item ("What is the capital of France?" has one entity). With the weights below that is one multi-digit
number with an entity, two entities, or four small numbers at least.

A name of several words ("Oakwood Middle School") is one anchor, found when all its words are in the window.
One missing name is forgiven (counted as found) when another of the item's names is found and the numbers found
weigh at least MIN_WEIGHT, enough to decide on their own: a rephraser drops an incidental name (a school, a team)
and keeps the person and the quantities. An item of names alone is never found on one of two names. Measured
(bench/results/semantic_study*.md, at the default threshold 1.0): SmolLM2's rephrases found 47/51 on seed 0 and
47/51 on seed 1, where names that had to be all found gave 43/51 and 45/51 (the variant `strict_names`), at 0.5%
of never-planted items flagged against 0.3% and 0.2%.

Rare words are a fallback anchor: they weigh RARE_WORD_WEIGHT only for an item whose numbers, code and names weigh
less than MIN_WEIGHT (a knowledge question such as "Which enzyme breaks down lactose?" has nothing else), and 0
otherwise. Why: a rephraser swaps rare words first ("barrettes" -> "hair clips") while a sibling of the same style
keeps them, so for an item with numbers and names they lowered a rephrase's score and not a sibling's. Measured
(bench/results/semantic_study.md, variants, seed 0): with them at weight 1 for every item, WordNet recall was 91.7%
at 1.3% false flags; at weight 0, 96.8% at 1.4% (both at the threshold their null sets at 1%).

An anchor occurs in the window when: a number is among the window's numbers (the same normalisation, anchors.py);
an identifier, entity or rare word is among the window's words (scoring/overlap/ngrams.py's, lowercased, so a name
at a sentence start in the window still counts); a string literal is a substring of the window's text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from scoring.overlap.ngrams import words
from scoring.semantic.anchors import KINDS, Anchors, numbers

# Why these weights: a number or a code identifier survives a rephrase almost always and two different items share
# a multi-digit one rarely; a small number (0-10) is in most word problems of a benchmark, so sharing one is weak
# evidence; a name survives a rephrase and a translation, but a benchmark reuses a few dozen names; a rare word is
# the first thing a rephraser swaps for a synonym, and a translation loses it.
LATIN_RUN = re.compile(r"[A-Za-z\u00c0-\u024f][0-9A-Za-z_\u00c0-\u024f]*")
WEIGHTS = {"numbers": 3.0, "code": 3.0, "entities": 2.0, "rare_words": 1.0}  # rare words: a fallback (docstring)
SMALL_NUMBER_WEIGHT = 1.0
SMALL_NUMBER_MAX = 10
MIN_WEIGHT = 4.0


@dataclass(frozen=True)
class WindowTerms:
    """What verify looks up in a window, extracted once however many items are checked against it."""

    text: str
    numbers: frozenset[str]
    words: frozenset[str]

    @classmethod
    def of(cls, text: str) -> "WindowTerms":
        # plus the Latin runs inside a \w run: CJK text writes a name against its characters ("给了Hiro")
        return cls(text, numbers(text), frozenset(words(text)) | {w.lower() for w in LATIN_RUN.findall(text)})


@dataclass(frozen=True)
class Verdict:
    found: dict[str, int]  # per kind: how many of the item's anchors occur in the window
    total: dict[str, int]  # per kind: how many anchors the item has
    score: float  # weighted recall in [0, 1]; 0 when the item has no anchor
    answer_found: bool | None  # every answer anchor occurs in the window; None when the row has no answer
    abstain: bool  # the item's anchors weigh < MIN_WEIGHT: too few to decide
    weight: float = field(default=0.0)  # the item's anchors' total weight
    name_forgiven: bool = False  # one missing name counted as found (module docstring)

    def recall(self, kind: str) -> float:
        """found / total for one kind; NaN when the item has no anchor of that kind."""
        return self.found[kind] / self.total[kind] if self.total[kind] else float("nan")


def is_small(number: str) -> bool:
    value = Decimal(number)
    return value == value.to_integral_value() and abs(value) <= SMALL_NUMBER_MAX


def anchor_weight(kind: str, anchor: str) -> float:
    if kind == "numbers" and is_small(anchor):
        return SMALL_NUMBER_WEIGHT
    return WEIGHTS[kind]


def weighted_anchors(item: Anchors) -> list[tuple[str, str, float]]:
    """(kind, anchor, weight) of every anchor of the item, rare words at 0 unless the others weigh < MIN_WEIGHT."""
    strong = [(kind, a, anchor_weight(kind, a)) for kind in KINDS if kind != "rare_words" for a in item.of(kind)]
    rare = WEIGHTS["rare_words"] if sum(w for *_, w in strong) < MIN_WEIGHT else 0.0
    return strong + [("rare_words", a, rare) for a in item.rare_words]


def item_weight(item: Anchors) -> float:
    """The total weight of an item's anchors (abstain below MIN_WEIGHT)."""
    return sum(w for *_, w in weighted_anchors(item))


def occurs(kind: str, anchor: str, window: WindowTerms) -> bool:
    if kind == "numbers":
        return anchor in window.numbers
    low = anchor.lower()
    if low in window.words:
        return True
    if kind == "entities" and " " in low:  # a name of several words: all of them
        return all(w in window.words for w in low.split())
    # a string literal ("hello world") or an identifier the window writes differently is looked for as written
    return kind == "code" and anchor in window.text


def verify(item: Anchors, window: str | WindowTerms) -> Verdict:
    """How much of the item's anchors the window holds (module docstring)."""
    w = window if isinstance(window, WindowTerms) else WindowTerms.of(window)
    found = dict.fromkeys(KINDS, 0)
    total = {kind: len(item.of(kind)) for kind in KINDS}
    got = weight = numbers_got = 0.0
    for kind, a, aw in weighted_anchors(item):
        weight += aw
        if occurs(kind, a, w):
            found[kind] += 1  # counted whatever its weight: report.json shows what the window holds
            got += aw
            numbers_got += aw if kind == "numbers" else 0.0
    forgiven = forgives_a_name(found["entities"], total["entities"], numbers_got)
    got += WEIGHTS["entities"] if forgiven else 0.0
    answer = None
    if item.answer:
        answer = all(a in w.numbers or a in w.words for a in item.answer)
    return Verdict(found, total, got / weight if weight else 0.0, answer, weight < MIN_WEIGHT, weight, forgiven)


def forgives_a_name(names_found: int, names: int, numbers_weight_found: float, bar: float = MIN_WEIGHT) -> bool:
    """Whether one missing name counts as found: another name is found and the numbers found weigh >= bar
    (MIN_WEIGHT; the study's variants try others)."""
    return 1 <= names_found < names and numbers_weight_found >= bar
