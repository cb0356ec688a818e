"""User corpora from plain files: jsonl (.jsonl, .jsonl.gz), Parquet and txt, local or under an s3:// prefix.

One document per jsonl line, per Parquet row, or per txt file. Dates come from a column (`date_field`) or, for files
whose name carries the date, from `date_from_filename`: a regex with named groups `year` (and optional `month`,
`day`), or with one group holding an ISO date. A value that is a number is read as Unix seconds; naive dates are
UTC. A document with no date is still yielded (created_at None) and the cutoff stage drops it as
"missing_date"; a line that is not a JSON object, or whose date cannot be read, becomes a quarantine document
(reasons "bad_json", "bad_date"). Every line is counted.

source_cfg keys: `path` (file, directory or s3:// prefix; required), `format` ("jsonl" | "parquet" | "txt"; default:
from each file's extension, and files of other types are skipped), `name` (corpus name in ids; default: the path's
base name), `text_field` ("text"), `id_field`, `title_field`, `url_field`, `date_field`, `date_from_filename`,
`requester_pays`, `endpoint_url`, `region`.

Ids: `files:<name>:<id_field value>`, else `files:<name>:<relative path>:<line or row number>` (txt:
`files:<name>:<relative path>`), stable across runs and machines.
"""
from __future__ import annotations

import gzip
import io
import json
import re
from datetime import date, datetime, timezone
from typing import Any, Iterator, Mapping

from curation.document import Document, utc
from curation.io import storage

FORMATS = {".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".txt": "txt"}


def file_format(path: str, configured: str | None = None) -> str | None:
    if configured:
        return configured
    name = storage.basename(path).lower()
    for suffix in sorted(FORMATS, key=len, reverse=True):
        if name.endswith(suffix):
            return FORMATS[suffix]
    return None


def corpus_files(source_cfg: Mapping[str, Any]) -> list[str]:
    opts = storage.s3_options(source_cfg)
    files = [f for f in storage.list_files(source_cfg["path"], **opts) if file_format(f, source_cfg.get("format"))]
    if not files:
        raise FileNotFoundError(f"no jsonl/parquet/txt files under {source_cfg['path']}")
    return files


def shards(source_cfg: Mapping[str, Any]) -> list[dict]:
    """One shard per file; `root` keeps ids relative to the configured path."""
    root = source_cfg.get("root") or source_cfg["path"]
    name = source_cfg.get("name") or corpus_name(root)
    return [{**source_cfg, "path": f, "root": root, "name": name} for f in corpus_files(source_cfg)]


def corpus_name(path: str) -> str:
    base = storage.basename(path)
    return base.split(".")[0] if "." in base and not base.startswith(".") else base


def to_utc(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"not a date: {value!r}")
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if isinstance(value, datetime):
        return utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    text = str(value).strip()
    if re.fullmatch(r"\d{4}(-\d{2})?", text):  # a year or a year-month (a file named 2015-02.jsonl) starts then
        text += "-01" * (3 - len(text.split("-")))
    return utc(text)


def date_from_filename(path: str, pattern: str | None) -> datetime | None:
    if not pattern:
        return None
    match = re.search(pattern, storage.basename(path))
    if not match:
        return None
    groups = match.groupdict()
    if groups.get("year"):
        return datetime(int(groups["year"]), int(groups.get("month") or 1), int(groups.get("day") or 1),
                        tzinfo=timezone.utc)
    return to_utc(match.group(1) if match.groups() else match.group(0))


STAGE = "source.files"


def _records(path: str, fmt: str, opts: Mapping[str, Any]) -> Iterator[tuple[int, dict | None, str]]:
    """(1-based line/row number, record or None, error) for every record of a jsonl or Parquet file, streamed."""
    if fmt == "jsonl":
        with storage.open_binary(path, **opts) as raw:
            stream = gzip.GzipFile(fileobj=raw) if path.lower().endswith(".gz") else raw
            for n, line in enumerate(io.TextIOWrapper(stream, encoding="utf-8", errors="replace"), start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield n, None, f"bad_json: {exc}"
                    continue
                yield (n, record, "") if isinstance(record, dict) else (n, None, "bad_json: not an object")
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        with storage.local_path(path, **opts) as local:
            n = 0
            for batch in pq.ParquetFile(local).iter_batches(batch_size=1024):
                for record in batch.to_pylist():
                    n += 1
                    yield n, record, ""
    else:
        raise ValueError(f"unknown file format {fmt!r}")


def _quarantined(doc_id: str, rel: str, n: int, reason: str, detail: str) -> Document:
    """A line the job must count but cannot use (see curation/sources/__init__.py)."""
    return Document(id=doc_id, source="files", title="", text="", created_at=None, url="",
                    meta={"file": rel, "line": n, "quarantine": {"stage": STAGE, "reason": reason,
                                                                 "detail": detail[:300]}})


def iter_file(path: str, source_cfg: Mapping[str, Any]) -> Iterator[Document]:
    opts = storage.s3_options(source_cfg)
    fmt = file_format(path, source_cfg.get("format"))
    root = source_cfg.get("root") or source_cfg["path"]
    name = source_cfg.get("name") or corpus_name(root)
    rel = storage.relative(path, root)
    file_date = date_from_filename(path, source_cfg.get("date_from_filename"))
    if fmt == "txt":
        with storage.open_binary(path, **opts) as f:
            text = f.read().decode("utf-8")
        yield Document(id=f"files:{name}:{rel}", source="files", title=storage.basename(path).rsplit(".", 1)[0],
                       text=text, created_at=file_date, url="", meta={"file": rel})
        return
    text_field = source_cfg.get("text_field") or "text"
    id_field, title_field = source_cfg.get("id_field"), source_cfg.get("title_field")
    url_field, date_field = source_cfg.get("url_field"), source_cfg.get("date_field")
    for n, record, error in _records(path, fmt, opts):
        fallback_id = f"files:{name}:{rel}:{n}"
        if record is None:
            reason, _, detail = error.partition(": ")
            yield _quarantined(fallback_id, rel, n, reason, detail)
            continue
        doc_id = f"files:{name}:{record[id_field]}" if id_field and record.get(id_field) is not None else fallback_id
        try:
            created = to_utc(record.get(date_field)) if date_field and record.get(date_field) is not None \
                else file_date
        except (ValueError, TypeError, OverflowError) as exc:
            yield _quarantined(doc_id, rel, n, "bad_date", f"{record.get(date_field)!r}: {exc}")
            continue
        yield Document(
            id=doc_id,
            source="files",
            title=str(record.get(title_field) or "") if title_field else "",
            text=str(record.get(text_field) or ""),
            created_at=created,
            url=str(record.get(url_field) or "") if url_field else "",
            meta={"file": rel, "line": n},
        )


def iter_documents(source_cfg: Mapping[str, Any]) -> Iterator[Document]:
    for shard in shards(source_cfg):
        yield from iter_file(shard["path"], shard)


def snapshot(source_cfg: Mapping[str, Any]) -> dict:
    opts = storage.s3_options(source_cfg)
    return {
        "kind": "files",
        "path": str(source_cfg["path"]),
        "dump_name": source_cfg.get("name") or corpus_name(source_cfg["path"]),
        "dump_date": str(source_cfg["dump_date"]) if source_cfg.get("dump_date") else None,
        "files": [storage.describe(f, **opts) for f in corpus_files(source_cfg)],
    }
