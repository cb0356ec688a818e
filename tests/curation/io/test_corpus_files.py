"""The corpus reader: every format, and every kind of bad input quarantined with its reason while the file goes on."""
from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.io.corpus_files import corpus_files, file_kind, read_records

DOCS = [{"id": f"d{i}", "text": f"document {i} " * 40} for i in range(1500)]
RAW = b"".join(json.dumps(d).encode() + b"\n" for d in DOCS)


def read(path: Path, root: Path, **kw):
    out = list(read_records(str(path), str(root), **kw))
    return [r for r in out if r[2] is None], [(r[0], r[2][0]) for r in out if r[2] is not None]


def test_file_kinds():
    assert file_kind("x/a.jsonl") == ("jsonl", None) and file_kind("a.json.gz") == ("jsonl", "gzip")
    assert file_kind("pile/00.jsonl.zst") == ("jsonl", "zstd") and file_kind("f.parquet") == ("parquet", None)
    assert file_kind("book.txt") == ("txt", None) and file_kind("notes.csv") is None


@pytest.mark.parametrize("name,blob", [("a.jsonl", lambda: RAW), ("a.jsonl.gz", lambda: gzip.compress(RAW)),
                                       ("a.jsonl.zst", lambda: __import__("zstandard").ZstdCompressor().compress(RAW))])
def test_jsonl_in_every_compression_reads_every_document(tmp_path: Path, name, blob):
    (tmp_path / name).write_bytes(blob())
    good, bad = read(tmp_path / name, tmp_path)
    assert [(r[0], r[1]) for r in good] == [(d["id"], d["text"]) for d in DOCS] and bad == []


def test_zstd_frames_back_to_back_read_as_one_stream(tmp_path: Path):
    import zstandard

    half = len(RAW) // 2
    cut = RAW.index(b"\n", half) + 1
    (tmp_path / "m.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(RAW[:cut])
                                           + zstandard.ZstdCompressor().compress(RAW[cut:]))
    good, bad = read(tmp_path / "m.jsonl.zst", tmp_path)
    assert len(good) == len(DOCS) and bad == []


@pytest.mark.parametrize("name,compress", [("t.jsonl.gz", gzip.compress),
                                           ("t.jsonl.zst", lambda b: __import__("zstandard").ZstdCompressor()
                                            .compress(b))])
def test_a_truncated_compressed_file_keeps_what_was_read_and_quarantines_the_rest(tmp_path: Path, name, compress):
    blob = compress(RAW)
    (tmp_path / name).write_bytes(blob[: len(blob) // 2])
    good, bad = read(tmp_path / name, tmp_path)
    assert 0 < len(good) < len(DOCS)
    assert len(bad) == 1 and bad[0][1] == "corrupt_file" and bad[0][0] == f"{name}:after-line-{len(good)}"


def test_bad_lines_are_quarantined_with_their_reason_and_ids_fall_back_to_file_and_line(tmp_path: Path):
    lines = [b'{"id": "a", "text": "fine"}', b'{"id": "b", "text": ', b'\xff\xfe not utf-8',
             b'{"id": "c", "body": "no text field"}', b'[1, 2]', b'', b'{"text": "no id"}']
    (tmp_path / "x.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    good, bad = read(tmp_path / "x.jsonl", tmp_path)
    assert [(r[0], r[1]) for r in good] == [("a", "fine"), ("x.jsonl:7", "no id")]
    assert bad == [("x.jsonl:2", "bad_json"), ("x.jsonl:3", "not_utf8"), ("c", "missing_text"),
                   ("x.jsonl:5", "bad_json")]


def test_parquet_reads_only_the_text_and_id_columns_and_a_broken_file_is_one_record(tmp_path: Path):
    table = pa.table({"id": ["p1", None, "p3"], "content": ["one", "two", None], "other": [1, 2, 3]})
    pq.write_table(table, tmp_path / "shard.parquet")
    good, bad = read(tmp_path / "shard.parquet", tmp_path, text_field="content")
    assert [(r[0], r[1]) for r in good] == [("p1", "one"), ("shard.parquet:2", "two")]
    assert bad == [("p3", "missing_text")]
    good, bad = read(tmp_path / "shard.parquet", tmp_path)  # no `text` column at all
    assert good == [] and bad == [("shard.parquet", "missing_text")]
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not a parquet file")
    assert read(tmp_path / "broken.parquet", tmp_path)[1] == [("broken.parquet:after-row-0", "corrupt_file")]


def test_txt_is_one_document_and_must_be_utf8(tmp_path: Path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "book.txt").write_text("Call me Ishmael.")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    assert read(tmp_path / "sub" / "book.txt", tmp_path)[0] == [("sub/book.txt", "Call me Ishmael.", None)]
    assert read(tmp_path / "latin1.txt", tmp_path)[1] == [("latin1.txt", "not_utf8")]


def test_corpus_files_from_a_directory_a_glob_and_one_file(tmp_path: Path):
    for name in ("b.jsonl.zst", "a.jsonl", "c.parquet", "notes.csv", ".hidden.jsonl"):
        (tmp_path / name).write_bytes(b"")
    files, root = corpus_files(str(tmp_path))
    assert [Path(f).name for f in files] == ["a.jsonl", "b.jsonl.zst", "c.parquet"] and root == str(tmp_path)
    files, root = corpus_files(str(tmp_path / "*.jsonl*"))
    assert [Path(f).name for f in files] == ["a.jsonl", "b.jsonl.zst"]
    files, root = corpus_files(str(tmp_path / "a.jsonl"))
    assert files == [str(tmp_path / "a.jsonl")] and root == str(tmp_path)
    with pytest.raises(FileNotFoundError, match="no corpus files"):
        corpus_files(str(tmp_path / "*.txt"))


def test_s3_prefix_and_glob(moto_s3):
    import zstandard

    s3 = moto_s3("corpus")
    s3.put_object(Bucket="corpus", Key="pile/00.jsonl.zst", Body=zstandard.ZstdCompressor().compress(RAW[:2000]))
    s3.put_object(Bucket="corpus", Key="pile/01.jsonl.gz", Body=gzip.compress(RAW[:2000]))
    s3.put_object(Bucket="corpus", Key="pile/README.md", Body=b"x")
    files, root = corpus_files("s3://corpus/pile")
    assert files == ["s3://corpus/pile/00.jsonl.zst", "s3://corpus/pile/01.jsonl.gz"]
    assert corpus_files("s3://corpus/pile/*.zst")[0] == ["s3://corpus/pile/00.jsonl.zst"]
    n = RAW[:2000].count(b"\n")
    counts = Counter(r[2][0] if r[2] else "ok" for f in files for r in read_records(f, root))
    assert counts == Counter({"ok": 2 * n, "bad_json": 2})  # each 2000-byte cut ends inside a line


def test_orjson_reads_every_line_as_json_would(tmp_path: Path, monkeypatch):
    """Lines are parsed by orjson, and by json where the two could differ: records and quarantine reasons (with
    their details) equal a json-only read, on odd lines and on randomly damaged ones."""
    import random

    import orjson

    from curation.io import corpus_files

    odd = [b'{"id": 123456789012345678901, "text": "an id past 64 bits"}', b'{"id": "big", "text": 99999999999999999999}',
           b'{"id": 1e400, "text": "inf id"}', b'{"id": NaN, "text": "nan id"}', b'{"id": 3.0, "text": "float id"}',
           b'{"id": "s", "text": "lone \\ud800 surrogate"}', b'{"id": "d", "text": "first", "text": "second"}',
           b'\xef\xbb\xbf{"id": "bom", "text": "x"}', b'{"id": "e", "text": "\\u00fcber \\ud83d\\ude42"}',
           b'{"id": "raw", "text": "caf\xc3\xa9 \xf0\x9f\x99\x82"}', b'{"id": "bad", "text": "a\xff"}',
           b'{"id": "ctl", "text": "tab\tinside"}', b'{"id": "ws", "text": "x"}\x0c', b'{"id": true, "text": "b"}',
           b'{"id": "", "text": "empty id"}', b'{"id": "deep", "v": ' + b"[" * 900 + b"]" * 900 + b', "text": "d"}',
           b'{"id": "n", "text": null}', b'"a string"', b'{"id": -0.0, "text": "minus zero"}']
    rng = random.Random(3)
    palette = [b"\xff", b"\xed\xa0\x80", b"NaN", b"\\ud800", b'"', b"{", b"}", b",", b" ", b"\x0c", b"0", b"9" * 22,
               b"\xc3", b"\xf0\x9f\x99\x82", b"1e999", b"-"]
    damaged = []
    for _ in range(3000):
        line = bytearray(rng.choice(odd))
        pos = rng.randint(0, len(line))
        line[pos:pos + rng.randint(0, 2)] = rng.choice(palette)
        damaged.append(bytes(line).replace(b"\n", b" "))
    (tmp_path / "odd.jsonl").write_bytes(b"\n".join(odd + damaged) + b"\n")

    def json_only(_line):
        raise orjson.JSONDecodeError("forced", "", 0)

    def both(**kw):
        fast = list(read_records(str(tmp_path / "odd.jsonl"), str(tmp_path), **kw))
        with monkeypatch.context() as m:
            m.setattr(corpus_files.orjson, "loads", json_only)
            return fast, list(read_records(str(tmp_path / "odd.jsonl"), str(tmp_path), **kw))

    fast, slow = both()
    assert fast == slow and ("123456789012345678901", "an id past 64 bits", None) in fast
    assert sum(r[2] is None for r in fast) > 300 and sum(r[2] is not None for r in fast) > 300  # both kinds, many
    for kw in ({"text_field": ("text", "body")}, {"id_field": None}):
        fast, slow = both(**kw)
        assert fast == slow
