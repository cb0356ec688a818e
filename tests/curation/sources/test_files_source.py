"""The plain-files source: jsonl / Parquet / txt with a date column or a date in the file name."""
from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.sources import files

UTC = timezone.utc


def make_corpus(root: Path) -> Path:
    (root / "news").mkdir(parents=True)
    lines = [{"id": "a", "text": "first story", "date": "2015-01-05", "title": "A", "url": "https://x/a"},
             {"text": "second story", "date": 1425168000},  # Unix seconds: 2015-03-01T00:00:00Z
             {"id": "c", "text": "no date here"}]
    with open(root / "news" / "2015-02.jsonl", "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
        f.write("{not json\n")
        f.write(json.dumps({"id": "d", "text": "bad date", "date": "someday"}) + "\n")
    with gzip.open(root / "news" / "more.jsonl.gz", "wt") as f:
        f.write(json.dumps({"id": "e", "text": "gzipped", "date": "2015-03-02T10:00:00+01:00"}) + "\n")
    pq.write_table(pa.table({"id": ["p1", "p2"], "text": ["parquet one", "parquet two"],
                             "date": pa.array([datetime(2015, 1, 1), datetime(2015, 3, 9)], pa.timestamp("s"))}),
                   root / "news" / "table.parquet")
    (root / "letters").mkdir()
    (root / "letters" / "letter-2014-12-24.txt").write_text("Dear all,\nmerry Christmas.\n")
    (root / "letters" / "notes.md").write_text("not a corpus file")
    return root


def test_files_documents_with_dates_from_columns_and_names(tmp_path: Path):
    root = make_corpus(tmp_path / "corpus")
    cfg = {"kind": "files", "path": str(root), "id_field": "id", "title_field": "title", "url_field": "url",
           "date_field": "date", "date_from_filename": r"(\d{4}-\d{2}(?:-\d{2})?)"}
    docs = {d["id"]: d for d in files.iter_documents(cfg)}
    assert docs["files:corpus:a"]["created_at"] == datetime(2015, 1, 5, tzinfo=UTC)
    assert docs["files:corpus:a"]["title"] == "A" and docs["files:corpus:a"]["url"] == "https://x/a"
    assert docs["files:corpus:news/2015-02.jsonl:2"]["created_at"] == datetime(2015, 3, 1, tzinfo=UTC)
    assert docs["files:corpus:c"]["created_at"] == datetime(2015, 2, 1, tzinfo=UTC)  # from the file name
    assert docs["files:corpus:news/2015-02.jsonl:4"]["meta"]["quarantine"]["reason"] == "bad_json"
    assert docs["files:corpus:d"]["meta"]["quarantine"]["reason"] == "bad_date"
    assert docs["files:corpus:e"]["created_at"] == datetime(2015, 3, 2, 9, tzinfo=UTC)
    assert docs["files:corpus:p2"]["created_at"] == datetime(2015, 3, 9, tzinfo=UTC)
    letter = docs["files:corpus:letters/letter-2014-12-24.txt"]
    assert letter["created_at"] == datetime(2014, 12, 24, tzinfo=UTC)
    assert letter["text"].startswith("Dear all,\nmerry") and letter["title"] == "letter-2014-12-24"
    assert len(docs) == 9  # 5 jsonl lines, 1 gzipped, 2 Parquet rows, 1 txt; the .md is skipped
    assert files.to_utc("2015") == datetime(2015, 1, 1, tzinfo=UTC)
    assert files.iter_documents({**cfg, "path": str(root / "news" / "table.parquet")}).__next__()["id"] == \
        "files:table:p1"


def test_named_date_groups_and_shards_keep_ids_stable(tmp_path: Path):
    root = make_corpus(tmp_path / "corpus")
    cfg = {"kind": "files", "path": str(root / "letters"), "name": "mail",
           "date_from_filename": r"(?P<year>\d{4})-(?P<month>\d{2})"}
    (doc,) = list(files.iter_documents(cfg))
    assert doc["created_at"] == datetime(2014, 12, 1, tzinfo=UTC) and doc["id"] == "files:mail:letter-2014-12-24.txt"
    whole = [d["id"] for d in files.iter_documents({"kind": "files", "path": str(root)})]
    by_shard = [d["id"] for s in files.shards({"kind": "files", "path": str(root)}) for d in files.iter_documents(s)]
    assert whole == by_shard


def test_files_on_s3_with_moto(tmp_path: Path):
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    root = make_corpus(tmp_path / "corpus")
    with moto.mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="corpora")
        for path in sorted(root.rglob("*")):
            if path.is_file():
                s3.upload_file(str(path), "corpora", f"corpus/{path.relative_to(root).as_posix()}")
        cfg = {"kind": "files", "path": "s3://corpora/corpus", "id_field": "id", "date_field": "date"}
        remote = [(d["id"], d["text"], d["created_at"]) for d in files.iter_documents(cfg)]
        snap = files.snapshot(cfg)
    local = [(d["id"], d["text"], d["created_at"]) for d in files.iter_documents({**cfg, "path": str(root)})]
    assert remote == local and len(snap["files"]) == 4  # the .md is not a corpus file
