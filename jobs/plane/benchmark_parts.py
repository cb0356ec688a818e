"""A benchmark cut into parts that workers read on their own: the driver plans from file sizes and Parquet
metadata, never from rows.

- jsonl: byte ranges of about `rows_per_part` lines (the average line length is estimated from the first 64 KiB
  of the first file, so the plan depends only on the input). A part owns the lines that *start* in its range, so
  every line belongs to exactly one part whatever the cut.
- Parquet: ranges of `rows_per_part` rows, read by row group.
Local paths and s3:// (ranged GETs, requester pays when asked) read the same way.

Row ids are the row's `id` field, else `<file stem>:<line or row number>` as `jobs.plane.benchmark_reader` names them. A
worker does not know how many lines precede its range, so a part's reader reports line numbers local to the part
and `PartSpec.first_line` (filled in by the driver from the survey's line counts) makes them global.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from jobs.plane.benchmark_reader import check_row, decode_line, quarantine

SAMPLE_BYTES = 64 << 10
EXTEND = 1 << 20  # how far past a range's end one read looks for the end of its last line


@dataclass(frozen=True)
class PartSpec:
    index: int
    path: str  # local path or s3:// URI
    fmt: str  # "jsonl" | "parquet"
    start: int  # byte offset (jsonl) or row number (parquet), inclusive
    stop: int  # exclusive
    requester_pays: bool = False
    first_line: int | None = None  # 1-based number of the part's first line in its file (jsonl; set after survey)

    @property
    def stem(self) -> str:
        return Path(posixpath.basename(self.path)).stem

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "PartSpec":
        return cls(**json.loads(text))


# ---------------------------------------------------------------- byte access, local or S3

class _Source:
    def __init__(self, path: str, requester_pays: bool = False):
        self.path, self.requester_pays = path, requester_pays
        self.s3 = path.startswith("s3://")
        if self.s3:
            from curation.io import storage

            self.bucket, self.key = storage.split_s3(path)
            self.client = storage.s3_client({})
            self.extra = storage.request_payer({"requester_pays": requester_pays})
            self.size = int(self.client.head_object(Bucket=self.bucket, Key=self.key, **self.extra)["ContentLength"])
        else:
            self.size = Path(path).stat().st_size

    def read(self, start: int, stop: int) -> bytes:
        stop = min(stop, self.size)
        if start >= stop:
            return b""
        if self.s3:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key, Range=f"bytes={start}-{stop - 1}",
                                          **self.extra)["Body"]
            return body.read()
        with open(self.path, "rb") as fh:
            fh.seek(start)
            return fh.read(stop - start)


def benchmark_files(benchmark: str, requester_pays: bool) -> list[str]:
    if benchmark.startswith("s3://"):
        from curation.io import storage

        opts = {"requester_pays": True} if requester_pays else {}
        names = storage.list_files(benchmark, **opts)
        if any("/data/" in n for n in names):
            if not any(n.endswith(("/_SUCCESS", "/manifest.json")) for n in names):
                raise FileNotFoundError(f"{benchmark} holds data/ but no _SUCCESS or manifest.json: an incomplete "
                                        "release (a build that did not finish); refusing to read it")
            names = [n for n in names if "/data/" in n]
        files = sorted(n for n in names if n.endswith((".jsonl", ".parquet")))
        if not files:
            raise FileNotFoundError(f"{benchmark}: no *.parquet or *.jsonl benchmark files found")
        return files
    from jobs.plane.benchmark_reader import benchmark_files

    return [str(p) for p in benchmark_files(benchmark)]


def input_identity(benchmark: str, requester_pays: bool) -> list:
    """What identifies the benchmark's content without holding it: each file's name, size and digest (streamed md5
    locally, the ETag on S3; `curation.io.storage.describe`)."""
    from curation.io import storage

    opts = {"requester_pays": True} if requester_pays else {}
    out = []
    for f in benchmark_files(str(benchmark), requester_pays):
        d = storage.describe(f, **opts)
        out.append([f if f.startswith("s3://") else os.path.basename(f), d["bytes"], d.get("etag") or d.get("md5")])
    return out


def plan_parts(benchmark: str, rows_per_part: int, requester_pays: bool = False) -> list[PartSpec]:
    if rows_per_part < 1:
        raise ValueError(f"rows per part must be at least 1, got {rows_per_part}")
    files = benchmark_files(str(benchmark), requester_pays)
    parts: list[PartSpec] = []
    bytes_per_line = None
    for f in files:
        src = _Source(f, requester_pays)
        if f.endswith(".parquet"):
            import pyarrow.parquet as pq

            n = pq.ParquetFile(io.BytesIO(src.read(0, src.size)) if src.s3 else f).metadata.num_rows
            for a in range(0, n, rows_per_part):
                parts.append(PartSpec(len(parts), f, "parquet", a, min(n, a + rows_per_part), requester_pays))
            continue
        if bytes_per_line is None:
            sample = src.read(0, SAMPLE_BYTES)
            lines = max(1, sample.count(b"\n") + (0 if sample.endswith(b"\n") or not sample else 1))
            bytes_per_line = max(1, len(sample) // lines)
        step = max(1, bytes_per_line * rows_per_part)
        for a in range(0, max(src.size, 1), step):
            parts.append(PartSpec(len(parts), f, "jsonl", a, min(src.size, a + step), requester_pays))
    return parts


# ---------------------------------------------------------------- reading one part on a worker

def _owned_lines(spec: PartSpec, src: _Source) -> Iterator[bytes]:
    """The raw lines (without their newline) that start inside [start, stop)."""
    start = spec.start
    if start > 0 and src.read(start - 1, start) != b"\n":
        pos = start  # the line at `start` began earlier: it belongs to the previous part
        while True:
            chunk = src.read(pos, min(pos + EXTEND, spec.stop))
            if not chunk:
                return
            nl = chunk.find(b"\n")
            if nl >= 0:
                start = pos + nl + 1
                break
            pos += len(chunk)
            if pos >= spec.stop:
                return
    if start >= spec.stop:
        return
    data = src.read(start, spec.stop)
    pos = spec.stop
    while data and not data.endswith(b"\n") and pos < src.size:  # finish the last line, wherever it ends
        more = src.read(pos, pos + EXTEND)
        nl = more.find(b"\n")
        data += more if nl < 0 else more[:nl + 1]
        pos += len(more)
        if nl >= 0:
            break
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    yield from lines


@dataclass
class PartRows:
    """What a worker read from one part: good rows (in order, each with `line`, its number within the part),
    quarantined rows, the number of lines or rows it owned, and the sha256 of its raw content."""

    rows: list[dict]
    quarantined: list[dict]
    n_lines: int
    digest: str


class RawPart:
    """The records one part owns, undecoded by any schema: iterate for (k, row id, JSON object or None, (reason,
    detail) or None, whether the id is the fallback), k numbering the part's lines or rows from 0. After the
    iteration, `n_lines` is the number of lines or rows the part owned (blank lines included) and `digest` the
    sha256 of its raw content (what the survey and the part markers compare). Ids of jsonl rows without an `id`
    need `spec.first_line`; until the driver knows it, they are `<stem>:+<line within part>` (`resolve_ids`)."""

    def __init__(self, spec: PartSpec):
        self.spec, self.n_lines, self._hash = spec, 0, hashlib.sha256()

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()

    def __iter__(self) -> Iterator[tuple[int, str, dict | None, tuple[str, str] | None, bool]]:
        spec = self.spec
        src = _Source(spec.path, spec.requester_pays)
        if spec.fmt == "parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(io.BytesIO(src.read(0, src.size)) if src.s3 else spec.path)
            records = _parquet_slice(pf, spec.start, spec.stop)
            self.n_lines = len(records)
            for k, raw in enumerate(records):
                self._hash.update(json.dumps(raw, sort_keys=True, default=str).encode())
                yield k, str(raw.get("id") or f"{spec.stem}:{spec.start + k + 1}"), raw, None, False
            return
        base = spec.first_line
        for k, line in enumerate(_owned_lines(spec, src)):
            self.n_lines += 1
            self._hash.update(line + b"\n")
            fallback = f"{spec.stem}:{base + k}" if base is not None else f"{spec.stem}:+{k}"
            if not line.strip():
                continue
            rid, raw, problem = decode_line(line, fallback)
            yield k, rid, raw, problem, rid == fallback


def read_part(spec: PartSpec) -> PartRows:
    """Decode and check every row of the part (a benchmark row: `check_row`)."""
    raw = RawPart(spec)
    rows, bad = [], []
    for k, rid, obj, problem, auto_id in raw:
        if problem:
            bad.append(quarantine(rid, *problem))
            continue
        row, q = check_row(obj, rid)
        (bad.append(q) if q else rows.append(dict(row, line=k, auto_id=auto_id)))
    return PartRows(rows, bad, raw.n_lines, raw.digest)


def _parquet_slice(pf, start: int, stop: int) -> list[dict]:
    out, at = [], 0
    for g in range(pf.metadata.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        if at + n > start and at < stop:
            table = pf.read_row_group(g)
            lo, hi = max(0, start - at), min(n, stop - at)
            out.extend(table.slice(lo, hi - lo).to_pylist())
        at += n
        if at >= stop:
            break
    return out
