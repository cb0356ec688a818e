"""scoring/semantic/decide.py: an item's decision rests on its best-verified candidate, `score` is always the nearest
window's cosine, an item without evidence is never flagged, and semantic.parquet's row fits its schema."""
from __future__ import annotations

import pyarrow as pa
import pytest

from scoring.semantic.anchors import anchors
from scoring.semantic.decide import SEMANTIC_SCHEMA, Candidate, decide, flagged, rephrased_share, semantic_row

ITEM = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did Natalia sell altogether in April and May?")
REPHRASE = "In April Natalia sold 48 clips to friends; in May, half that many. What is the total for April and May?"
SIBLING = "Tom sold 36 pens to his classmates in June and a third as many in July. How many pens did Tom sell?"


def cand(rank: int, cosine: float, text: str, doc: str = "d") -> Candidate:
    return Candidate(rank, cosine, f"{doc}{rank}", 10 * rank, len(text.split()), 100 * rank, 100 * rank + len(text),
                     text)


def test_the_decision_rests_on_the_best_verified_candidate_and_score_is_the_nearest_cosine():
    d = decide(anchors(ITEM), [cand(0, 0.91, SIBLING), cand(1, 0.88, REPHRASE), cand(2, 0.4, ITEM)])
    assert d.score == pytest.approx(0.91)  # the nearest window's cosine, whatever the decision
    assert d.candidate.rank == 1 and d.candidate.doc_id == "d1"  # the rephrase holds every anchor
    assert d.decision_score == pytest.approx(1.0) and d.verdict.score == pytest.approx(1.0)
    assert flagged(d, 0.7) and not flagged(d, 1.01)


def test_ties_go_to_the_better_ranked_candidate_and_no_evidence_shows_the_nearest():
    d = decide(anchors(ITEM), [cand(0, 0.9, REPHRASE), cand(1, 0.9, REPHRASE)])
    assert d.candidate.rank == 0
    none = decide(anchors(ITEM), [cand(0, 0.3, REPHRASE), cand(1, 0.8, SIBLING)])  # below the floor; no anchors
    assert none.decision_score == 0.0 and none.candidate.rank == 0
    assert not flagged(none, 0.0)  # a threshold of 0 does not flag an item without evidence


def test_an_item_without_candidates_has_an_empty_row():
    d = decide(anchors(ITEM), [])
    row = semantic_row("q", d, 0.5)
    assert row["score"] is None and row["doc_id"] is None and row["rephrased"] is False
    assert pa.Table.from_pylist([row], schema=SEMANTIC_SCHEMA).num_rows == 1


def test_a_row_fills_every_column_of_semantic_parquet():
    d = decide(anchors(ITEM, answer="#### 72"), [cand(0, 0.95, REPHRASE + " 72")])
    row = semantic_row("q1", d, 0.7)
    assert set(row) == set(SEMANTIC_SCHEMA.names)
    t = pa.Table.from_pylist([row], schema=SEMANTIC_SCHEMA)
    got = t.to_pylist()[0]
    assert got["answer_found"] is True and got["numbers_found"] == got["numbers_total"] == 1
    assert got["entities_found"] == got["entities_total"] == 3 and got["judge"] is None and got["rephrased"]
    assert (got["start_word"], got["char_start"], got["char_end"]) == (0, 0, len(REPHRASE) + 3)


def test_the_rephrased_share_has_a_wilson_interval():
    s = rephrased_share([True, False, False, False])
    assert (s["n"], s["flagged"], s["share"]) == (4, 1, 0.25)
    assert 0 < s["share_ci"][0] < 0.25 < s["share_ci"][1] < 1 and s["share_ci_method"] == "wilson"
    assert rephrased_share([])["share"] is None
