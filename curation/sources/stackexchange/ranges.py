"""A Stack Exchange Posts.xml parsed in parallel: byte ranges aligned to line starts, and the answers' pass as a
partitioned aggregation keyed by question id.

Every `<row .../>` of a dump is one line (bodies encode their newlines as `&#xA;`), so a range [start, end) owns
each line that *starts* inside it: a reader seeks to start − 1, skips to the next line break, and reads lines
until it passes end (the last line may run past end; the next range skips it). No row is cut or read twice.

Thread activity needs the latest answer per question, and answers may sit anywhere in the file, so:
  1. scan (per range, parallel): answer rows only → (question id, whole UTC epoch seconds) pairs, reduced to the
     latest per question and split into P partitions by question id mod P (an answer that certainly parses is
     read off its bytes, rows.settled_values; the others are parsed);
  2. reduce (per partition, parallel): the ranges' pieces of one partition → one array sorted by question id;
  3. parse (per range, parallel): question rows → documents, each looking its question id up in partition
     id mod P (a binary search in a sorted uint32 array, shared read-only through Ray's object store). A row that
     certainly parses and is no question is left unparsed here (rows.settled_non_question).
No process ever holds a per-site map; the job's driver holds only object references.

A line that is not a row (the XML declaration, DOCTYPE, <posts>) is skipped; a line that should be a row but does
not parse, or a question row without its dates, becomes a quarantine document (reason `broken_row` / `bad_row`).
Lines are parsed a few hundred at a time with the same result as one by one (rows.py).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from curation.document import Deferred, Document, utc
from curation.io import storage

RANGE_BYTES = 64 << 20  # ~60k posts of a typical site: many tasks per site, each a few seconds
MAX_PARTITIONS = 64
STAGE = "parse"
_ANSWER = b'PostTypeId="2"'
_ANSWER_VALUES = (b" PostTypeId=", b" ParentId=", b" CreationDate=")


def byte_ranges(size: int, range_bytes: int = RANGE_BYTES) -> list[list[int]]:
    n = max(1, -(-int(size) // int(range_bytes)))
    return [[k * range_bytes, min(size, (k + 1) * range_bytes)] for k in range(n)]


def iter_lines(path: str, start: int, end: int, **opts: Any) -> Iterator[tuple[int, bytes]]:
    """(byte offset, line) for every line that starts in [start, end)."""
    begin = max(0, int(start) - 1)
    with storage.open_binary(path, begin, **opts) as stream:
        pos = begin
        if start > 0:  # the line that starts before `start` (or at start − 1's break) belongs to the range before
            pos += len(stream.readline())
        while pos < end:
            line = stream.readline()
            if not line:
                return
            yield pos, line
            pos += len(line)


# ---------------------------------------------------------------- the answers' aggregation

def latest_per_question(pairs: np.ndarray) -> np.ndarray:
    """(question id, seconds) rows → one row per question id, the latest seconds, sorted by question id."""
    if not len(pairs):
        return np.zeros((0, 2), dtype=np.uint32)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    pairs = pairs[order]
    last = np.r_[pairs[1:, 0] != pairs[:-1, 0], True]
    return np.ascontiguousarray(pairs[last], dtype=np.uint32)


def scan_answers(shard: Mapping[str, Any], partitions: int) -> list[np.ndarray]:
    """One range's answers, reduced and split into `partitions` arrays by question id mod partitions."""
    from curation.sources.stackexchange.rows import iter_rows, settled_values

    qids, secs = [], []

    def add(kind: str | None, parent: str | None, created: str | None) -> None:
        if kind == "2" and parent and created:
            try:  # both values or neither: an unreadable date once left the two lists of different lengths
                qid, sec = int(parent), int(utc(created).timestamp())
            except ValueError:
                return
            qids.append(qid)
            secs.append(sec)

    def to_parse(lines):  # the answers whose values cannot be read off their bytes (rows.settled_values)
        for item in lines:
            if _ANSWER in item[1]:
                values = settled_values(item[1], _ANSWER_VALUES)
                if values is None:
                    yield item
                else:
                    add(*values)

    start, end = shard["byte_range"]
    lines = iter_lines(shard["path"], start, end, **storage.s3_options(shard))
    for _, row, broken in iter_rows(to_parse(lines)):
        if row and broken is None:  # the question pass quarantines broken rows
            add(row.get("PostTypeId"), row.get("ParentId"), row.get("CreationDate"))
    pairs = latest_per_question(np.asarray([qids, secs], dtype=np.int64).T.reshape(-1, 2))
    part = pairs[:, 0] % partitions
    return [pairs[part == p] for p in range(partitions)]


def merge_answers(*pieces: np.ndarray) -> np.ndarray:
    """One partition's pieces from every range → sorted by question id, the latest answer each."""
    return latest_per_question(np.concatenate(pieces) if pieces else np.zeros((0, 2), np.uint32))


class AnswerLookup:
    """Latest answer time of a question from the P partition arrays (each sorted by question id)."""

    def __init__(self, partitions: Sequence[np.ndarray]):
        self.parts = list(partitions)
        self._keys: dict[int, np.ndarray] = {}

    def get(self, question_id: int) -> datetime | None:
        p = question_id % len(self.parts)
        part = self.parts[p]
        keys = self._keys.get(p)
        if keys is None:  # int64 once: searching a uint32 column for a Python int casts the whole column per call
            keys = self._keys[p] = part[:, 0].astype(np.int64)
        i = int(keys.searchsorted(question_id))
        if i < len(keys) and int(keys[i]) == question_id:
            return datetime.fromtimestamp(int(part[i, 1]), tz=timezone.utc)
        return None


def partitions_for(n_ranges: int) -> int:
    return max(1, min(MAX_PARTITIONS, int(n_ranges)))


# ---------------------------------------------------------------- the question pass

def _quarantined(doc_id: str, reason: str, detail: str, site: str) -> Document:
    return Document(id=doc_id, source="stackexchange", title="", text="",
                    created_at=datetime(1970, 1, 1, tzinfo=timezone.utc), url="",
                    meta={"site": site, "quarantine": {"stage": STAGE, "reason": reason, "detail": detail[:500]}})


def broken_dump_document(path: str, domain: str, detail: str) -> Document:
    """A site dump that could not be decompressed or parsed: one quarantine document, so the job counts it."""
    from curation.sources.stackexchange.posts import site_name

    site = site_name(domain)
    return _quarantined(f"stackexchange:{site}:dump", "broken_dump", f"{path}: {detail}", site)


def iter_range_documents(shard: Mapping[str, Any], answers: AnswerLookup,
                         deferred: bool = False) -> Iterator[Document | Deferred]:
    """The questions of one range (and a quarantine document per broken row), in file order; `deferred` as in
    posts.question_document."""
    from curation.sources.stackexchange.posts import QUESTION, question_document, site_name
    from curation.sources.stackexchange.rows import iter_rows, settled_non_question

    domain = shard["site"]
    site = site_name(domain)
    start, end = shard["byte_range"]
    lines = iter_lines(shard["path"], start, end, **storage.s3_options(shard))
    # A row that certainly parses and is no question would yield nothing below: it is left unparsed (answers are
    # most of a dump's bytes). Anything in doubt, a broken answer included, is parsed and quarantined as before.
    for offset, row, broken in iter_rows(item for item in lines if not settled_non_question(item[1])):
        if broken is not None:
            yield _quarantined(f"stackexchange:{site}:byte{offset}", "broken_row", f"byte {offset}: {broken}", site)
            continue
        if row is None or row.get("PostTypeId") != QUESTION:
            continue
        row = dict(row.items())  # the same dict as dict(row); lxml lists its attributes ~2x faster this way
        try:
            yield question_document(row, domain, answers.get(int(row["Id"])), deferred)
        except (KeyError, ValueError) as exc:
            rid = row.get("Id") or f"byte{offset}"
            yield _quarantined(f"stackexchange:{site}:{rid}", "bad_row", f"{type(exc).__name__}: {exc}", site)


# ---------------------------------------------------------------- a .7z, staged once so that it can be split

def stage_archive(archive: str, staging: str, domain: str, **opts: Any) -> str:
    """The Posts.xml of a site .7z, decompressed once (streamed) to `staging` (a directory or an s3:// prefix that
    every worker can read) and reused while the archive is unchanged; returns its path. The `_COMPLETE` marker is
    written last, so an interrupted extraction is redone, never half-used."""
    import hashlib
    import json
    import os
    import posixpath

    from curation.sources.stackexchange.dump import open_posts

    if storage.is_s3(archive):
        info = storage.describe(archive, **opts)  # HEAD: size and ETag
        ident = [archive, info["bytes"], info.get("etag")]
    else:
        st = os.stat(archive)
        ident = [os.path.abspath(archive), st.st_size, st.st_mtime_ns]
    key = f"{domain}-{hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:12]}"
    join = posixpath.join if storage.is_s3(staging) else os.path.join
    target, marker = join(staging, key, "Posts.xml"), join(staging, key, "_COMPLETE")
    if storage.exists(marker, **opts) and storage.exists(target, **opts):
        return target
    with open_posts(archive, **opts) as stream:
        n = storage.write_stream(target, stream, **opts)
    storage.write_stream(marker, _bytes_stream(json.dumps({"archive": ident, "bytes": n}).encode()), **opts)
    return target


def _bytes_stream(data: bytes):
    import io

    return io.BytesIO(data)
