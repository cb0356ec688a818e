"""The data contracts that every curation stage shares (see docs/design.md).

A *document* comes out of a source; a *benchmark row* goes into a release; a *quarantine row* records a row that
left a job without being kept, and why. All three are plain dicts so that Ray Data batches, pyarrow tables and
unit tests use the same shape without conversion.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable, NamedTuple, TypedDict

import pyarrow as pa


class Document(TypedDict):
    id: str  # stable, source-prefixed: "stackexchange:coffee:123", "arxiv:2303.01234", "wikipedia:en:12345"
    source: str
    title: str
    text: str
    created_at: datetime  # timezone-aware UTC
    url: str
    meta: dict[str, Any]


class Deferred(NamedTuple):
    """A document whose text a source makes only when asked (sources' TEXT_ON_REQUEST, curation/sources/__init__.py):
    `head` is the document with `title` and `text` empty and without the meta keys derived from the text;
    `rest()` returns (title, text, those meta keys). The build calls it only for documents that get past the stages
    that read neither text nor title (curation/stages/pipeline.annotate_documents)."""

    head: Document
    rest: Callable[[], tuple[str, str, dict[str, Any]]]


class BenchmarkRow(TypedDict):
    id: str
    input: str
    label: int  # 1 = member
    bucket: int  # word-length bucket, e.g. 32/64/128/256
    source: str
    created_at: datetime
    url: str


class QuarantineRow(TypedDict):
    id: str
    stage: str
    reason: str
    detail: str


BENCHMARK_COLUMNS = ("id", "input", "label", "bucket", "source", "created_at", "url")
QUARANTINE_COLUMNS = ("id", "stage", "reason", "detail")
# The one quarantine schema: every job and the release write quarantined rows with these four string columns.
QUARANTINE_SCHEMA = pa.schema([(name, pa.string()) for name in QUARANTINE_COLUMNS])


class ReconcileError(RuntimeError):
    """Rows in != rows out + rows quarantined, at some step of some job: never papered over; the job fails and
    nothing is published."""


def utc(value: str | datetime) -> datetime:
    """Parse an ISO date/time as UTC. Naive values are taken to be UTC (Stack Exchange dumps carry no zone)."""
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
