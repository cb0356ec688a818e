"""Dated texts → the scorer's input, on the workers (`tidemark cutoff`). The driver only plans.

A dated row is `text` (or a release's `input`), `date` (or a release's `created_at`: an ISO date, date-time or
YYYY-MM), and optionally `id`, `source` and `group`. The input is cut into the parts `evaluate` cuts a benchmark
into (jsonl byte ranges, Parquet row ranges; local or s3://), and each staging task writes, for its part k:

    _staging/rows/part-k.parquet         the scorer's input: {id, input, label: 0, bucket: source}
    _staging/meta/part-k.parquet         per staged row: id, date (as given), period (YYYY-MM), source, group
    _staging/quarantine/part-k.parquet   rows that cannot be dated or scored, with the reason (the shared schema)

Reasons: `not_utf8` and `bad_json` (the line), `empty_input` (no text), `no_date`, `bad_date` (not an ISO date or
month), `outside_months` (outside --months). Nothing is dropped silently: rows in = staged + quarantined, per part.
The scorer's reader needs a 0/1 label; a cutoff job has none, so every row is staged with 0 and nothing reads it.
A row without an `id` is named `<file stem>:<line>` (jsonl) or `<file stem>:<row>` (Parquet), as `evaluate`
names it; the line numbers are global, so a first pass counts each jsonl part's lines (bytes only).
Staging is deterministic (same input and settings → the same bytes), which is what lets the scoring resume.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import Sequence

import pyarrow as pa

from curation.io.ledger import quarantine_record, quarantine_table

ROWS = "_staging/rows"
META = "_staging/meta"
QUARANTINE = "_staging/quarantine"
STAGE = "read"
STAGED_SCHEMA = pa.schema([("id", pa.string()), ("input", pa.string()), ("label", pa.int8()),
                           ("bucket", pa.string())])
META_SCHEMA = pa.schema([("id", pa.string()), ("date", pa.string()), ("period", pa.string()),
                         ("source", pa.string()), ("group", pa.string())])


def _text(raw: dict):
    return raw["text"] if "text" in raw else raw.get("input")


def _date(raw: dict):
    return raw["date"] if "date" in raw else raw.get("created_at")


def _optional_str(value) -> str | None:
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def date_text(value) -> str:
    """The date as given, as text (a Parquet timestamp reads as a datetime: written back in ISO form)."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def dated_row(raw: dict, rid: str, months: tuple[int, int] | None) -> tuple[dict | None, dict | None]:
    """(staged row with its meta, None) or (None, quarantine record) for one decoded row."""
    from scoring.cutoff.periods import DateError, month_label, month_of

    text = _text(raw)
    if not isinstance(text, str) or not text.strip():
        return None, quarantine_record(rid, STAGE, "empty_input", f"text={text!r}"[:100])
    value = _date(raw)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, quarantine_record(rid, STAGE, "no_date", "the row has no `date` (or `created_at`)")
    try:
        month = month_of(value)
    except DateError as exc:
        return None, quarantine_record(rid, STAGE, "bad_date", str(exc)[:200])
    if months is not None and not months[0] <= month <= months[1]:
        return None, quarantine_record(rid, STAGE, "outside_months", f"{month_label(month)} is outside "
                                       f"{month_label(months[0])}..{month_label(months[1])}")
    source = _optional_str(raw.get("source"))
    return {"id": rid, "input": text, "label": 0, "bucket": source, "date": date_text(value),
            "period": month_label(month), "source": source, "group": _optional_str(raw.get("group"))}, None


def count_lines(shared: dict, part: str) -> tuple[int, int]:
    """(part index, lines it owns): the first pass, so that rows without an id get global line numbers."""
    from jobs.plane.benchmark_parts import PartSpec, RawPart

    spec = PartSpec.from_json(part)
    raw = RawPart(spec)
    for _ in raw:
        pass
    return spec.index, raw.n_lines


def number_lines(parts: Sequence, counts: dict[int, int]) -> list:
    """The parts with `first_line` set: jsonl lines are numbered from 1 per file, in part order."""
    out, at = [], {}
    for p in parts:
        if p.fmt != "jsonl":
            out.append(p)
            continue
        first = at.get(p.path, 1)
        out.append(replace(p, first_line=first))
        at[p.path] = first + counts[p.index]
    return out


def stage_part(shared: dict, part: str) -> dict:
    """Stage one part (Ray-free); returns its counts."""
    from curation.io.outputs import Location
    from jobs.plane.benchmark_parts import PartSpec, RawPart

    spec = PartSpec.from_json(part)
    months = tuple(shared["months"]) if shared.get("months") else None
    staged, bad = [], []
    for _, rid, raw, problem, _ in RawPart(spec):
        if problem:
            bad.append(quarantine_record(rid, STAGE, *problem))
            continue
        row, q = dated_row(raw, rid, months)
        (bad.append(q) if q else staged.append(row))
    out = Location(shared["dest"])
    name = f"part-{spec.index:05d}.parquet"
    out.write_parquet(f"{ROWS}/{name}", pa.Table.from_pylist(staged, schema=STAGED_SCHEMA))
    out.write_parquet(f"{META}/{name}", pa.Table.from_pylist(staged, schema=META_SCHEMA))
    out.write_parquet(f"{QUARANTINE}/{name}", quarantine_table(bad))
    return {"index": spec.index, "rows_in": len(staged) + len(bad), "staged": len(staged), "quarantined": len(bad),
            "reasons": dict(Counter(q["reason"] for q in bad))}


def run_staging(dated: str, dest: str, *, rows_per_part: int, requester_pays: bool,
                months: tuple[int, int] | None, runner, progress: bool = True) -> list[dict]:
    """Plan `dated` into parts, number jsonl lines, stage every part (tasks on `runner`: Ray, or this process);
    returns the parts' counts in part order."""
    from curation.io.outputs import Location
    from jobs.plane.benchmark_parts import plan_parts

    Location(dest).delete_tree("_staging")  # an earlier plan's parts must not be read with this one's
    parts = plan_parts(dated, rows_per_part, requester_pays)
    jsonl = [p for p in parts if p.fmt == "jsonl"]
    counts = dict(runner.map(count_lines, [{"part": p.to_json()} for p in jsonl], {}, desc="dated rows (lines)",
                             progress=progress, num_cpus=0.5)) if jsonl else {}
    parts = number_lines(parts, counts)
    shared = {"dest": dest, "months": list(months) if months else None}
    done = runner.map(stage_part, [{"part": p.to_json()} for p in parts], shared, desc="dated rows (staging)",
                      progress=progress, num_cpus=0.5)
    return sorted(done, key=lambda s: s["index"])


def staging_summary(parts: list[dict]) -> dict:
    reasons: Counter = Counter()
    for s in parts:
        reasons.update(s["reasons"])
    return {"rows_in": sum(s["rows_in"] for s in parts), "staged": sum(s["staged"] for s in parts),
            "quarantined": sum(s["quarantined"] for s in parts), "reasons": dict(reasons), "parts": len(parts)}


def describe_input(dated: str) -> dict:
    """What the report says of the input: the path, and a release's manifest facts where it is one."""
    from pathlib import Path

    p = Path(dated)
    info = {"path": dated}
    if not dated.startswith("s3://") and (p / "manifest.json").is_file():
        manifest = json.loads((p / "manifest.json").read_text())
        info.update(kind="release", name=manifest.get("name"), source=manifest.get("source", {}).get("kind"))
    return info
