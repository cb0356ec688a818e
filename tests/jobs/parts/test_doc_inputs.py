"""Reading audit inputs: every file and row is a document or a quarantine row with a reason."""
from __future__ import annotations

import json

import pytest

from jobs.parts.doc_inputs import read_documents, row_text


def test_folder_of_books_with_bad_files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "book1.txt").write_text("\ufeffIt was the best of times, it was the worst of times.")
    (tmp_path / "book2.md").write_text("Call me Ishmael. Some years ago, never mind how long precisely.")
    (tmp_path / "empty.txt").write_text(" \n\t")
    (tmp_path / "latin1.txt").write_bytes("Caf\xe9".encode("latin-1"))
    (tmp_path / "short.txt").write_text("two words")
    (tmp_path / "notes.csv").write_text("ignored,file")
    docs, bad = read_documents(str(tmp_path), min_words=3)
    assert [d["id"] for d in docs] == ["a/book1.txt", "book2.md"]
    assert docs[0]["text"].startswith("It was") and docs[0]["n_words"] == 12
    assert {b["id"]: b["reason"] for b in bad} == {"empty.txt": "empty", "latin1.txt": "not_utf8",
                                                   "short.txt": "too_short"}
    globbed, _ = read_documents(str(tmp_path / "**" / "book*.txt"))
    assert [d["id"] for d in globbed] == [str(tmp_path / "a" / "book1.txt")]
    with pytest.raises(FileNotFoundError):
        read_documents(str(tmp_path / "missing"))


def test_gsm8k_style_jsonl_rows(tmp_path):
    f = tmp_path / "gsm.jsonl"
    rows = [{"question": "Natalia sold 48 clips. How many?", "answer": "48 #### 48"},
            {"id": "x7", "text": "A plain text row.", "label": 1},
            {"question": ""},
            {"id": "x7", "input": "duplicate id"},
            {"foo": "bar"}]
    f.write_bytes(b"\n".join(json.dumps(r).encode() for r in rows) + b"\nnot json\n" + b'{"text": "caf\xe9"}\n')
    docs, bad = read_documents(str(f))
    assert [(d["id"], d["label"]) for d in docs] == [("gsm:1", None), ("x7", 1)]
    assert docs[0]["text"] == "Natalia sold 48 clips. How many?\n48 #### 48"
    assert {b["id"]: b["reason"] for b in bad} == {"gsm:3": "empty", "gsm:5": "empty", "gsm:6": "bad_json",
                                                   "gsm:7": "not_utf8"} | {"x7": "duplicate_id"}
    assert len(docs) + len(bad) == 7


def test_row_text_prefers_question_answer():
    assert row_text({"question": "Q?", "answer": "A", "text": "t"}) == "Q?\nA"
    assert row_text({"input": "i"}) == "i" and row_text({"n": 1}) is None


def test_corrupt_and_upper_case_parquet_files(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["r1"], "text": ["a row from a Parquet file named in capitals"]}),
                   tmp_path / "GOOD.PARQUET")
    (tmp_path / "corrupt.parquet").write_bytes(b"PAR1 this is not a parquet footer")
    docs, bad = read_documents(str(tmp_path))
    assert [d["id"] for d in docs] == ["r1"]
    assert [(b["id"], b["reason"]) for b in bad] == [("corrupt.parquet", "unreadable")]
    assert "ArrowInvalid" in bad[0]["detail"]
