"""One benchmark item's decision from its candidate corpus windows, and the rephrased share of a benchmark.

An item's candidates are the corpus windows nearest to it by cosine (search.py's top k, merged over the corpus
parts). Each candidate is checked against the item's anchors (verify.py) and given a decision score
(calibrate.decision_score). The item's decision score is its best candidate's; the candidate the decision rests
on is that one (the better-ranked one on a tie), or, when no candidate scores above 0, the nearest window, so a
reviewer always sees the passage the embedding found closest. `score` is always the nearest window's cosine: what
the embedding alone says, before any verification.

An item is flagged (`rephrased`) when its decision score reaches the threshold and is above 0: a threshold of 0
(a null where most items score 0 and a generous false-flag rate) must not flag items that have no evidence at all.
With the optional LLM judge (judge.py), `judge` is its verdict on the item's decided pair ("yes", "no", "unparsed"),
null where it was not asked, and `rephrased` is its verdict where it gave one, else the verifier's flag.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import pyarrow as pa

from scoring.semantic.anchors import KINDS, Anchors
from scoring.semantic.calibrate import decision_score
from scoring.semantic.judge import rephrased
from scoring.semantic.verify import Verdict, WindowTerms, verify
from scoring.stats.proportions import wilson_ci

# semantic.parquet: one row per scored benchmark row. Offsets are the decided window's in its corpus document:
# document text[char_start:char_end] is the passage; start_word counts whitespace-separated words (windows.py).
SEMANTIC_SCHEMA = pa.schema(
    [("id", pa.string()), ("score", pa.float64()), ("doc_id", pa.string()), ("start_word", pa.int64()),
     ("n_words", pa.int64()), ("char_start", pa.int64()), ("char_end", pa.int64()), ("rank", pa.int64()),
     ("cosine", pa.float64()), ("verifier_score", pa.float64()), ("abstain", pa.bool_()),
     ("answer_found", pa.bool_()), ("name_forgiven", pa.bool_()),
     *[(f"{kind}_{end}", pa.int64()) for kind in KINDS for end in ("found", "total")],
     ("decision_score", pa.float64()), ("judge", pa.string()), ("rephrased", pa.bool_())])


@dataclass(frozen=True)
class Candidate:
    """A corpus window near an item: its rank among the item's merged top k (0: nearest) and where it is."""

    rank: int
    cosine: float
    doc_id: str
    start_word: int
    n_words: int
    char_start: int
    char_end: int
    text: str


@dataclass(frozen=True)
class Decision:
    score: float | None  # the nearest window's cosine; None when the corpus gave no window
    candidate: Candidate | None  # the window the decision rests on
    verdict: Verdict | None
    decision_score: float  # 0.0 when there is no candidate


def decide(item: Anchors, candidates: Sequence[Candidate],
           terms: Callable[[str], WindowTerms] = WindowTerms.of) -> Decision:
    """The item's decision over its candidates, given in rank order (`terms` may cache a window's terms: one
    window is often a candidate of several items)."""
    if not candidates:
        return Decision(None, None, None, 0.0)
    verdicts = [verify(item, terms(c.text)) for c in candidates]
    scores = [decision_score(c.cosine, v.score, v.abstain) for c, v in zip(candidates, verdicts)]
    best = max(range(len(candidates)), key=lambda j: (scores[j], -candidates[j].rank))
    if scores[best] <= 0.0:
        best = min(range(len(candidates)), key=lambda j: candidates[j].rank)
    return Decision(float(candidates[0].cosine), candidates[best], verdicts[best], float(scores[best]))


def flagged(d: Decision, threshold: float) -> bool:
    return d.decision_score > 0.0 and d.decision_score >= threshold


def semantic_row(rid: str, d: Decision, threshold: float, judge: str | None = None) -> dict:
    """semantic.parquet's row for one item (`judge`: the LLM judge's verdict, None where it was not asked)."""
    c, v = d.candidate, d.verdict
    row = {"id": rid, "score": d.score, "doc_id": c.doc_id if c else None, "decision_score": d.decision_score,
           "judge": judge, "rephrased": rephrased(flagged(d, threshold), judge)}
    for f in ("start_word", "n_words", "char_start", "char_end", "rank", "cosine"):
        row[f] = getattr(c, f) if c else None
    row |= {"verifier_score": v.score if v else None, "abstain": v.abstain if v else None,
            "answer_found": v.answer_found if v else None, "name_forgiven": v.name_forgiven if v else None}
    for kind in KINDS:
        row[f"{kind}_found"] = v.found[kind] if v else None
        row[f"{kind}_total"] = v.total[kind] if v else None
    return row


def rephrased_share(flags: Sequence[bool]) -> dict:
    """n, flagged, share and its Wilson 95% interval (None where n is 0)."""
    n, k = len(flags), int(sum(bool(f) for f in flags))
    lo, hi = wilson_ci(k, n) if n else (None, None)
    return {"n": n, "flagged": k, "share": k / n if n else None, "share_ci": [lo, hi], "share_ci_method": "wilson"}
