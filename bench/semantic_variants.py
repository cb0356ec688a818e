"""Variants of the semantic decision rule, measured on the study's own candidates (bench/semantic_study.py): what a
change to the constants of scoring/semantic/verify.py and calibrate.py would do to recall and false flags, without
editing scoring/. Each variant re-scores the same top-k windows of every query with verify.py's matching
(`occurs`) and calibrate.py's decision rule, changing one thing:

- `current`: verify.py's rule, rare words a fallback anchor (weight 1 only for an item whose other anchors weigh
  less than MIN_WEIGHT);
- `rare_words_always_1` / `_0` / `_0.5`: rare words at that weight for every item (1 was the first run's rule). A
  rephraser swaps them first, and a sibling of the same template keeps them, so they lower a rephrase's score and
  not a sibling's;
- `rare_words_0_entity_1`: also names weigh as a small number (2.0 -> 1.0): a benchmark reuses a few dozen names,
  and a small model drops incidental ones ("Middle School", a team's name);
- `top_10`: only the 10 best windows are verified (k = 10 instead of the study's k);
- `cosine_tiebreak`: decision + 0.01 x cosine, so that items tied at a verifier score of 1.0 are ordered by cosine
  and a threshold can fall inside the tie;
- `target_0.5%` with and without the tie-break: the threshold set at 0.5% of the null instead of 1%;
- `strict_names`: no missing name is forgiven (verify.py forgives one when another name is found and the numbers
  found weigh MIN_WEIGHT);
- `words_as_names`: also each word of a name its own anchor ("Oakwood Middle School" three names): the rule before
  2026-11-29 09:00;
- `forgive_whatever_the_numbers`: a missing name forgiven whenever another is found, the numbers found whatever
  they weigh.
The threshold is set on null half A and measured on half B, as in the study.

Also counted: *anchor twins*, never-planted items whose every number and name occurs in one planted sibling of the
same template. For a verifier that reads numbers and names they are indistinguishable from a rephrase, so their
share is a floor under any anchor rule's false-flag rate on this data.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from scoring.semantic.anchors import KINDS, Anchors, anchors
from scoring.semantic.calibrate import ABSTAIN_COSINE, COSINE_FLOOR
from scoring.semantic.verify import (MIN_WEIGHT, WEIGHTS, WindowTerms, anchor_weight, forgives_a_name, occurs,
                                     weighted_anchors)


def weighted_recall(item: Anchors, window: WindowTerms, weight=None, forgive: float | None = MIN_WEIGHT,
                    names_as_words: bool = False) -> tuple[float, bool]:
    """verify.verify's score and abstain, with another weight function (kind, anchor) -> weight (None: verify's own,
    verify.weighted_anchors), another bar for forgiving a missing name (None: never; verify's is MIN_WEIGHT), or each
    word of a name its own anchor (the rule before names were runs)."""
    item = replace(item, entities=frozenset(w for e in item.entities for w in e.split())) if names_as_words else item
    got = total = numbers_got = 0.0
    found = names = 0
    triples = weighted_anchors(item) if weight is None else [(kind, a, weight(kind, a)) for kind in KINDS
                                                               for a in item.of(kind)]
    for kind, a, w in triples:
        total += w
        names += kind == "entities"
        if occurs(kind, a, window):
            got += w
            numbers_got += w if kind == "numbers" else 0.0
            found += kind == "entities"
    if forgive is not None and forgives_a_name(found, names, numbers_got, forgive):
        got += WEIGHTS["entities"] if weight is None else weight("entities", "")
    return (got / total if total else 0.0), total < MIN_WEIGHT


def decision(cos: np.ndarray, ver: np.ndarray, abstain: np.ndarray, tiebreak: float = 0.0) -> np.ndarray:
    fallback = np.clip((cos - ABSTAIN_COSINE) / (1 - ABSTAIN_COSINE), 0.0, 1.0)
    out = np.where(cos < COSINE_FLOOR, 0.0, np.where(abstain, fallback, ver))
    return out + tiebreak * np.where(np.isfinite(cos), cos, 0.0)


def rescore(queries, texts, top_ids, top_cos, weight, k: int | None = None, tiebreak: float = 0.0,
            rule: dict | None = None) -> np.ndarray:
    """Each query's largest decision over its first k candidates, under `weight` (and `rule`: weighted_recall's
    forgive and names_as_words)."""
    k = top_ids.shape[1] if k is None else k
    terms: dict[int, WindowTerms] = {}
    ver = np.zeros((len(queries), k))
    abstain = np.zeros((len(queries), k), dtype=bool)
    for q, it in enumerate(queries):
        a = anchors(it["input"], answer=it["target"])
        for j in range(k):
            w = int(top_ids[q, j])
            if w < 0 or top_cos[q, j] < COSINE_FLOOR:
                continue
            if w not in terms:
                terms[w] = WindowTerms.of(texts[w])
            ver[q, j], abstain[q, j] = weighted_recall(a, terms[w], weight, **(rule or {}))
    return decision(top_cos[:, :k].astype(float), ver, abstain, tiebreak).max(1)


def _rare(weight: float):
    def w(kind, a):
        return weight if kind == "rare_words" else anchor_weight(kind, a)
    return w


def _rare0_entity1(kind, a):
    return 0.0 if kind == "rare_words" else 1.0 if kind == "entities" else anchor_weight(kind, a)


# "current" is verify.py's rule (rare words a fallback); "rare_words_always_1" the rule of the study's first run
VARIANTS = {"current": (None, None, 0.0, 0.01), "rare_words_always_1": (anchor_weight, None, 0.0, 0.01),
            "rare_words_always_0": (_rare(0.0), None, 0.0, 0.01),
            "rare_words_always_0.5": (_rare(0.5), None, 0.0, 0.01),
            "rare_words_0_entity_1": (_rare0_entity1, None, 0.0, 0.01), "top_10": (None, 10, 0.0, 0.01),
            "cosine_tiebreak": (None, None, 0.01, 0.01),
            "target_0.5%": (None, None, 0.0, 0.005),
            "target_0.5%_with_tiebreak": (None, None, 0.01, 0.005),
            "strict_names": (None, None, 0.0, 0.01, {"forgive": None}),
            "words_as_names": (None, None, 0.0, 0.01, {"forgive": None, "names_as_words": True}),
            "forgive_whatever_the_numbers": (None, None, 0.0, 0.01, {"forgive": 0.0})}


def measure_variants(queries, role, half, texts, top_ids, top_cos, positives, calibrate, proportion) -> dict:
    """Recall per rephraser and false flags on the negatives for every variant (calibrate and proportion are the
    study's, passed in so that the two files do not import each other)."""
    out = {}
    for name, (weight, k, tiebreak, target, *rule) in VARIANTS.items():
        s = rescore(queries, texts, top_ids, top_cos, weight, k, tiebreak, rule[0] if rule else None)
        cal = calibrate(s[role == "null"], half[role == "null"], target)
        flags = s >= cal["threshold"]
        out[name] = {"target_rate": target, "threshold": round(cal["threshold"], 4), "held_out": cal["held_out"],
                     "recall": {r: proportion(flags[role == r].sum(), (role == r).sum()) for r in positives},
                     "false_flags_negatives": proportion(flags[role == "negative"].sum(), (role == "negative").sum())}
    return out


def twin_of(items: list[dict]):
    """A test: does a draw hold every number of one of `items` of its template? Such a draw is the same problem
    with other names and filler words: its answer is the item's (a template's answer is a function of its numbers)."""
    by: dict[str, list[frozenset]] = {}
    for it in items:
        by.setdefault(it["template"], []).append(anchors(it["input"]).numbers)

    def test(draw: dict) -> bool:
        nums = anchors(draw["input"]).numbers
        return any(n <= nums for n in by.get(draw["template"], []))
    return test


def anchor_twins(items: list[dict], planted: list[dict]) -> list[bool]:
    """For each item: does one planted item of its template hold all its numbers (the same problem renamed)?"""
    by: dict[str, list[frozenset]] = {}
    for p in planted:
        by.setdefault(p["template"], []).append(anchors(p["input"]).numbers)
    return [any(anchors(it["input"]).numbers <= n for n in by.get(it["template"], [])) for it in items]
