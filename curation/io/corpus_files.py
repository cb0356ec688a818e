"""Pretraining-corpus files as (document id, text) records, streamed, with every bad record quarantined.

Formats, by file name: `.jsonl` / `.json` / `.ndjson` (one JSON object per line), the same compressed with gzip
(`.gz`, Dolma's `.json.gz`) or Zstandard (`.zst`, the Pile's `.jsonl.zst`), Parquet (Hugging Face dataset shards,
FineWeb; only the text and id columns are read, batch by batch) and `.txt` (one document per file). Local paths,
directories, globs (`data/*.jsonl.zst`) and s3:// prefixes or keys (read through curation/io/storage.py).

A record the reader cannot use becomes a quarantine record, and the file goes on:
`not_utf8` (a line or text file that is not UTF-8), `bad_json` (a line that is not a JSON object), `missing_text`
(no string under the text field), `corrupt_file` (a compressed stream or Parquet file that breaks: the records read
before the break are kept; the rest of the file is one quarantine record that names the line it broke after).
Ids: the record's id field when present, else `<path relative to the corpus root>:<line or row number>`. The
text field may be a tuple of names, the first one present wins (the audit's reference corpora: `text`, else
`input`).
"""
from __future__ import annotations

import fnmatch
import gzip
import io
import json
import os
import zlib
from glob import glob
from typing import Any, Iterator, Mapping

import orjson

from curation.io import storage

STAGE = "corpus.read"
JSONL = (".jsonl", ".json", ".ndjson")
COMPRESSION = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
Record = tuple[str, "str | None", "tuple[str, str] | None"]  # (id, text, (reason, detail) when quarantined)


def file_kind(path: str) -> tuple[str, str | None] | None:
    """(format, compression) from the file's name, or None for a file the reader skips."""
    name = storage.basename(path).lower()
    compression = None
    for suffix, kind in COMPRESSION.items():
        if name.endswith(suffix):
            name, compression = name[: -len(suffix)], kind
            break
    if name.endswith(JSONL):
        return "jsonl", compression
    if name.endswith(".parquet") and compression is None:
        return "parquet", None
    if name.endswith(".txt"):
        return "txt", compression
    return None


def corpus_files(spec: str, **opts: Any) -> tuple[list[str], str]:
    """The corpus's readable files, sorted, and the root that ids are relative to. `spec` is a file, a directory,
    a glob (local, or the last part of an s3:// key) or an s3:// prefix."""
    pattern = None
    if any(c in storage.basename(spec) for c in "*?["):
        spec, pattern = spec.rsplit("/", 1)
    if not storage.is_s3(spec) and pattern is not None:
        files = sorted(p for p in glob(os.path.join(spec, pattern)) if os.path.isfile(p))
    else:
        files = storage.list_files(spec, **opts)
        if pattern is not None:
            files = [f for f in files if fnmatch.fnmatch(storage.basename(f), pattern)]
    files = [f for f in files if file_kind(f)]
    if not files:
        raise FileNotFoundError(f"no corpus files (jsonl, jsonl.gz, jsonl.zst, Parquet, txt) at {spec}"
                                + (f" matching {pattern}" if pattern else ""))
    root = spec if pattern is not None or len(files) > 1 or files[0] != spec else os.path.dirname(spec)
    return files, root


def _decompressed(raw, compression: str | None):
    if compression == "gzip":
        return io.BufferedReader(gzip.GzipFile(fileobj=raw))
    if compression == "zstd":
        return io.BufferedReader(_ZstdStream(raw), buffer_size=1 << 20)
    return raw


class _ZstdStream(io.RawIOBase):
    """Zstandard frames one after another, decompressed as read; input that ends inside a frame raises EOFError
    (zstandard's own stream reader ends quietly on a truncated file, which would hide a damaged shard)."""

    def __init__(self, raw, chunk: int = 1 << 20):
        import zstandard

        self._raw, self._chunk, self._zstd = raw, chunk, zstandard
        self._obj, self._pending, self._fed = zstandard.ZstdDecompressor().decompressobj(), b"", False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            data = self._raw.read(self._chunk)
            if not data:
                if self._fed and not self._obj.eof:
                    raise EOFError("zstd stream ended inside a frame (truncated file)")
                return 0
            while data:
                if self._obj.eof:  # the next frame
                    self._obj = self._zstd.ZstdDecompressor().decompressobj()
                self._fed = True
                self._pending += self._obj.decompress(data)
                data = self._obj.unused_data if self._obj.eof else b""
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _broken(exc: BaseException) -> bool:
    """An error that means the file's bytes are damaged (not a bug of ours)."""
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return True
    try:
        import zstandard

        if isinstance(exc, zstandard.ZstdError):
            return True
    except ImportError:  # pragma: no cover - zstandard is a dependency
        pass
    return isinstance(exc, OSError) and not isinstance(exc, (FileNotFoundError, PermissionError))


def _text_of(obj: Mapping, fields: tuple[str, ...]):
    for f in fields:
        if f in obj:
            return f, obj[f]
    return fields[0], None


def _loads(line: bytes, text_field: tuple[str, ...], id_field: str | None):
    """A line's JSON value. orjson parses corpus lines several times faster than json; a line it refuses (NaN,
    lone surrogates, bytes that are not UTF-8, ...) is json's to read or refuse, and so is a line whose id or text
    orjson reads as a float (it reads an integer past 64 bits as one, json as an int): what is read, and why a line
    is quarantined, stay json's (tests/curation/io/test_corpus_files.py compares the two on mutated lines)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line.decode("utf-8"))
    if type(obj) is dict and (type(obj.get(id_field)) is float or type(_text_of(obj, text_field)[1]) is float):
        return json.loads(line.decode("utf-8"))
    return obj


def _jsonl(stream, rel: str, text_field: tuple[str, ...], id_field: str | None) -> Iterator[Record]:
    n = 0
    try:
        for n, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            fallback = f"{rel}:{n}"
            try:
                obj = _loads(line, text_field, id_field)
            except UnicodeDecodeError as exc:
                yield fallback, None, ("not_utf8", str(exc))
                continue
            except json.JSONDecodeError as exc:
                yield fallback, None, ("bad_json", str(exc))
                continue
            if not isinstance(obj, dict):
                yield fallback, None, ("bad_json", "line is not a JSON object")
                continue
            rid = obj.get(id_field) if id_field else None
            rid = fallback if rid is None or rid == "" else str(rid)
            field, text = _text_of(obj, text_field)
            if not isinstance(text, str):
                yield rid, None, ("missing_text", f"no string under {field!r} (got {type(text).__name__})")
                continue
            yield rid, text, None
    except Exception as exc:  # noqa: BLE001 - damaged bytes end the file as one record; anything else is raised
        if not _broken(exc):
            raise
        yield f"{rel}:after-line-{n}", None, ("corrupt_file", f"{type(exc).__name__}: {exc}"[:300])


def _parquet(local: str, rel: str, text_fields: tuple[str, ...], id_field: str | None) -> Iterator[Record]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    try:
        f = pq.ParquetFile(local)
        names = set(f.schema_arrow.names)
        text_field = next((t for t in text_fields if t in names), None)
        if text_field is None:
            yield rel, None, ("missing_text", f"no column {text_fields[0]!r} (columns: {sorted(names)[:10]})")
            return
        columns = [text_field] + ([id_field] if id_field and id_field in names else [])
        for batch in f.iter_batches(batch_size=1024, columns=columns):
            texts = batch.column(text_field).to_pylist()
            ids = batch.column(id_field).to_pylist() if len(columns) > 1 else [None] * len(texts)
            for text, rid in zip(texts, ids):
                n += 1
                rid = f"{rel}:{n}" if rid is None or rid == "" else str(rid)
                if not isinstance(text, str):
                    yield rid, None, ("missing_text", f"{text_field!r} is {type(text).__name__}")
                else:
                    yield rid, text, None
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError, EOFError) as exc:
        yield f"{rel}:after-row-{n}", None, ("corrupt_file", f"{type(exc).__name__}: {exc}"[:300])


def read_records(path: str, root: str, *, text_field: str | tuple[str, ...] = "text", id_field: str | None = "id",
                 opts: Mapping[str, Any] | None = None) -> Iterator[Record]:
    """Every record of one corpus file, in file order: (id, text, None) or (id, None, (reason, detail))."""
    opts = dict(opts or {})
    text_field = (text_field,) if isinstance(text_field, str) else tuple(text_field)
    kind = file_kind(path)
    if kind is None:
        raise ValueError(f"{path}: not a corpus file this reader knows")
    fmt, compression = kind
    rel = storage.relative(path, root) if path != root else storage.basename(path)
    if fmt == "parquet":
        with storage.local_path(path, **opts) as local:
            yield from _parquet(local, rel, text_field, id_field)
        return
    with storage.open_binary(path, **opts) as raw:
        stream = _decompressed(raw, compression)
        if fmt == "jsonl":
            yield from _jsonl(stream, rel, text_field, id_field)
            return
        try:
            data = stream.read()
        except Exception as exc:  # noqa: BLE001 - as in _jsonl
            if not _broken(exc):
                raise
            yield rel, None, ("corrupt_file", f"{type(exc).__name__}: {exc}"[:300])
            return
        try:
            yield rel, data.decode("utf-8"), None
        except UnicodeDecodeError as exc:
            yield rel, None, ("not_utf8", str(exc))


def iter_texts(path) -> Iterator[str]:
    """Plain text corpora for reference statistics (evaluate's --ref-corpus: DC-PDD's token frequencies): a .txt
    file (one document), a .jsonl (`text` or `input`), or a directory of them."""
    from pathlib import Path

    p = Path(path)
    files = sorted(x for x in p.rglob("*") if x.suffix in (".txt", ".jsonl")) if p.is_dir() else [p]
    for f in files:
        if f.suffix == ".jsonl":
            with open(f, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if line.strip():
                        obj = json.loads(line)
                        text = obj.get("text") or obj.get("input") or ""
                        if text:
                            yield text
        else:
            yield f.read_text(encoding="utf-8", errors="replace")
