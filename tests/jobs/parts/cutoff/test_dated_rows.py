"""Dated rows staged for scoring (jobs/parts/cutoff/dated_rows.py), without Ray: every row staged or quarantined with its
reason, ids as evaluate names them, the same bytes however the input is cut."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.parts.cutoff.dated_rows import META, QUARANTINE, ROWS, run_staging, staging_summary
from jobs.plane.runners import LOCAL

LINES = [
    {"id": "a", "text": "first text", "date": "2020-01-15", "source": "se", "group": "g1"},
    {"text": "no id here", "date": "2020-02"},
    {"id": "c", "text": "   ", "date": "2020-02"},
    {"id": "d", "text": "no date"},
    {"id": "e", "text": "bad date", "date": "15/02/2020"},
    {"id": "f", "text": "out of range", "date": "2019-05-01"},
    {"id": "g", "input": "a release's field names", "created_at": "2020-03-01T10:00:00Z", "source": "se"},
]


def write(tmp_path, lines, extra=b""):
    path = tmp_path / "dated.jsonl"
    path.write_bytes("".join(json.dumps(x) + "\n" for x in lines).encode() + extra)
    return path


def stage(path, dest, rows_per_part=2, months=None):
    return run_staging(str(path), str(dest), rows_per_part=rows_per_part, requester_pays=False, months=months,
                       runner=LOCAL, progress=False)


def test_every_row_is_staged_or_quarantined_with_a_reason(tmp_path):
    from scoring.cutoff.periods import month_index

    path = write(tmp_path, LINES, b"not json\n\n")
    parts = stage(path, tmp_path / "out", months=(month_index(2020, 1), month_index(2020, 12)))
    s = staging_summary(parts)
    assert (s["rows_in"], s["staged"], s["quarantined"]) == (8, 3, 5)
    assert s["reasons"] == {"empty_input": 1, "no_date": 1, "bad_date": 1, "outside_months": 1, "bad_json": 1}
    meta = pq.read_table(tmp_path / "out" / META).to_pylist()
    assert [(m["id"], m["period"], m["source"], m["group"]) for m in meta] == [
        ("a", "2020-01", "se", "g1"), ("dated:2", "2020-02", None, None), ("g", "2020-03", "se", None)]
    assert meta[2]["date"] == "2020-03-01T10:00:00Z"  # as given
    rows = pq.read_table(tmp_path / "out" / ROWS).to_pylist()
    assert rows[1] == {"id": "dated:2", "input": "no id here", "label": 0, "bucket": None}
    q = pq.read_table(tmp_path / "out" / QUARANTINE).to_pylist()
    assert {r["id"]: r["reason"] for r in q}["dated:8"] == "bad_json"  # line numbers are the file's
    assert "not an ISO date" in {r["id"]: r["detail"] for r in q}["e"]


def test_the_cut_does_not_change_what_is_staged(tmp_path):
    path = write(tmp_path, LINES * 3)
    a, b = tmp_path / "a", tmp_path / "b"
    stage(path, a, rows_per_part=1)
    stage(path, b, rows_per_part=100)
    for under in (META, ROWS, QUARANTINE):
        assert pq.read_table(a / under).to_pylist() == pq.read_table(b / under).to_pylist()


def test_parquet_with_timestamps(tmp_path):
    t = pa.table({"id": ["x", "y"], "text": ["one", "two"],
                  "date": pa.array([datetime(2021, 5, 31, 23, tzinfo=timezone.utc), None], pa.timestamp("s", "UTC"))})
    pq.write_table(t, tmp_path / "d.parquet")
    parts = stage(tmp_path / "d.parquet", tmp_path / "out")
    assert staging_summary(parts)["reasons"] == {"no_date": 1}
    meta = pq.read_table(tmp_path / "out" / META).to_pylist()
    assert meta[0]["period"] == "2021-05" and meta[0]["date"].startswith("2021-05-31T23:00:00")


def test_staging_twice_gives_the_same_bytes(tmp_path):
    path = write(tmp_path, LINES)
    stage(path, tmp_path / "out")
    first = {p.name: p.read_bytes() for p in (tmp_path / "out" / ROWS).iterdir()}
    stage(path, tmp_path / "out")
    assert first == {p.name: p.read_bytes() for p in (tmp_path / "out" / ROWS).iterdir()}
