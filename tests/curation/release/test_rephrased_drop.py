"""--drop-rephrased's decision over sampled rows (curation/release/rephrased.py), by hand: the join by id, else by
text, the flagged non-members dropped with the overlap and passage in the detail, flagged members kept, rows the
overlap did not check counted, and an overlap that joins nothing refused in one line."""
from __future__ import annotations

import pyarrow as pa
import pytest

from curation.release.rephrased import (OVERLAP_SCHEMA, REASON, RephrasedDropError, RephrasedOverlap,
                                        drop_rephrased)
from scoring.overlap.ngrams import text_key

ROWS = [{"id": f"doc{k}@16", "input": f"Passage number {k} about the harbour.", "label": int(k < 3)}
        for k in range(6)]  # doc0-2 members, doc3-5 non-members


def overlap(ids, texts, flags, path="runs/ov", facts=None) -> RephrasedOverlap:
    details = [f"doc_id c{k}, characters 0-40" if f else None for k, f in enumerate(flags)]
    table = pa.table({"id": ids, "key": pa.array([text_key(t) if t else None for t in texts], pa.uint64()),
                      "rephrased": flags, "detail": details}, schema=OVERLAP_SCHEMA)
    return RephrasedOverlap(path, table, facts or {"embedder": "minilm", "threshold": 0.6})


def test_by_id_flagged_nonmembers_go_and_flagged_members_stay():
    ids = [r["id"] for r in ROWS[:5]]  # doc5 was not in the overlap's benchmark: not checked
    ov = overlap(ids, [None] * 5, [True, False, False, True, True])
    kept, dropped, record = drop_rephrased(ROWS, [ov])
    assert [d["id"] for d in dropped] == ["doc3@16", "doc4@16"]
    assert {d["reason"] for d in dropped} == {REASON}
    assert dropped[0]["detail"] == "runs/ov: doc_id c3, characters 0-40"
    assert [r["id"] for r in kept] == ["doc0@16", "doc1@16", "doc2@16", "doc5@16"]  # doc0: a flagged member
    o, = record["overlaps"]
    assert (o["join"], o["rows_joined"], o["rows_not_checked"]) == ("id", 5, 1)
    assert (o["flagged_nonmembers"], o["flagged_members_kept"], o["overlap_flagged"]) == (2, 1, 3)
    assert o["embedder"] == "minilm" and record["dropped"] == 2 and record["rows_in"] == 6


def test_by_text_when_no_id_matches_and_two_overlaps_name_one_row_once():
    texts = [r["input"].upper() + "  " for r in ROWS]  # other case and spacing: the same words
    by_text = overlap([f"q{k}" for k in range(6)], texts, [False, False, False, False, True, True], "runs/a")
    by_id = overlap(["doc5@16"], [None], [True], "runs/b")
    kept, dropped, record = drop_rephrased(ROWS, [by_text, by_id])
    assert [d["id"] for d in dropped] == ["doc4@16", "doc5@16"]
    assert dropped[1]["detail"] == "runs/a: doc_id c5, characters 0-40; runs/b: doc_id c0, characters 0-40"
    assert [o["join"] for o in record["overlaps"]] == ["text", "id"]
    assert len(kept) + len(dropped) == len(ROWS)


def test_an_overlap_of_another_benchmark_is_refused_in_one_line():
    other = overlap(["x1", "x2"], ["Something else entirely.", None], [True, False], "runs/other",
                    {"benchmark": "other.jsonl"})
    with pytest.raises(RephrasedDropError) as err:
        drop_rephrased(ROWS, [other])
    msg = str(err.value)
    assert "--drop-rephrased runs/other: none of its 2 rows is a row of this release, by id or by text" in msg
    assert "other.jsonl" in msg and "\n" not in msg
    unread = overlap(["x1"], [None], [True], "runs/unread", {"benchmark": "gone/"})
    with pytest.raises(RephrasedDropError, match="whose texts could not be read here"):
        drop_rephrased(ROWS, [unread])
