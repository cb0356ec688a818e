"""Read a benchmark (jsonl, Parquet, or a release directory) into rows, quarantining bad ones with a reason.

Never crashes on a bad row: a line that is not UTF-8, not JSON, has no text or no usable label becomes a
quarantine row `{id, stage, reason, detail}`. rows in = good rows + quarantined rows, always.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from curation.io.ledger import quarantine_record

STAGE = "read"


def quarantine(rid: str, reason: str, detail: str) -> dict:
    return quarantine_record(rid, STAGE, reason, detail)


def check_row(raw: dict[str, Any], rid: str, *, text_field: str | None = None,
              require_label: bool = True, keep: Sequence[str] = ()) -> tuple[dict | None, dict | None]:
    """A row as the scorers read it (`input`, else `text`, or `text_field`; a 0/1 `label`; `bucket`). Without
    `require_label` (overlap: GSM8K-like rows have none) a missing label is None and the row's `split` is kept, and
    so is each field named in `keep` (overlap --semantic: the answer field), as a string or None."""
    text = raw.get(text_field) if text_field else raw.get("input", raw.get("text"))
    if not isinstance(text, str) or not text.strip():
        return None, quarantine(rid, "empty_input", f"{text_field or 'input'}={text!r}"[:100])
    label = raw.get("label")
    if not require_label:
        good = label in (0, 1) and not isinstance(label, bool)
        bucket, split = raw.get("bucket"), raw.get("split")
        kept = {f: None if raw.get(f) is None else str(raw[f]) for f in keep}
        return {"id": rid, "input": text, "label": int(label) if good else None,
                "bucket": None if bucket is None else str(bucket), "split": None if split is None else str(split),
                **kept}, None
    try:
        label_int = int(label)
        if label_int not in (0, 1) or float(label) != label_int:
            raise ValueError
    except (TypeError, ValueError):
        return None, quarantine(rid, "bad_label", f"label={label!r} (need 1 = member or 0 = non-member)")
    bucket = raw.get("bucket")
    return {"id": rid, "input": text, "label": label_int, "bucket": None if bucket is None else str(bucket)}, None


def jsonl_objects(path: Path):
    """(row id, JSON object or None, (reason, detail) or None) per non-blank line of a jsonl file. The id is the
    line's `id` field, else `<file stem>:<line number>`; a line that is not UTF-8 or not a JSON object comes
    back with its reason (`not_utf8`, `bad_json`), so every reader quarantines it the same way."""
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                yield decode_line(line, f"{path.stem}:{n}")


def decode_line(line: bytes, fallback_id: str):
    """One jsonl line → (row id, JSON object or None, (reason, detail) or None); the id is the object's `id`
    field, else `fallback_id`."""
    try:
        raw = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return fallback_id, None, ("not_utf8", str(exc))
    except json.JSONDecodeError as exc:
        return fallback_id, None, ("bad_json", str(exc))
    if not isinstance(raw, dict):
        return fallback_id, None, ("bad_json", "line is not a JSON object")
    return str(raw.get("id") or fallback_id), raw, None


def _jsonl_rows(path: Path, **check):
    for rid, raw, problem in jsonl_objects(path):
        yield (None, quarantine(rid, *problem)) if problem else check_row(raw, rid, **check)


def _parquet_rows(path: Path, **check):
    import pyarrow.parquet as pq

    for n, raw in enumerate(pq.read_table(path).to_pylist(), start=1):
        yield check_row(raw, str(raw.get("id") or f"{path.stem}:{n}"), **check)


def benchmark_files(path: str | Path) -> list[Path]:
    p = Path(path)
    if p.is_dir():
        data = p / "data" if (p / "data").is_dir() else p
        files = sorted([*data.glob("*.parquet"), *data.glob("*.jsonl")])
        if not files:
            raise FileNotFoundError(f"{p}: no *.parquet or *.jsonl benchmark files found")
        return files
    if not p.exists():
        raise FileNotFoundError(f"benchmark {p} does not exist")
    return [p]


def read_benchmark(path: str | Path, *, text_field: str | None = None, require_label: bool = True,
                   keep: Sequence[str] = ()) -> tuple[list[dict], list[dict]]:
    """Return (rows, quarantined). Duplicate ids are quarantined too: results are joined on id. `keep`: fields
    carried into each row as they are (without `require_label` only; see check_row)."""
    rows, quarantined, seen = [], [], set()
    check = {"text_field": text_field, "require_label": require_label, **({"keep": tuple(keep)} if keep else {})}
    for f in benchmark_files(path):
        it = _parquet_rows(f, **check) if f.suffix == ".parquet" else _jsonl_rows(f, **check)
        for row, bad in it:
            if bad is not None:
                quarantined.append(bad)
            elif row["id"] in seen:
                quarantined.append(quarantine(row["id"], "duplicate_id", "an earlier row has the same id"))
            else:
                seen.add(row["id"])
                rows.append(row)
    return rows, quarantined


def text_keys(path: str | None, text_field: str | None = None) -> dict[str, int | None]:
    """id → join key (scoring/overlap/ngrams.text_key) of every readable row of a benchmark another job read: how
    `impact` and `build-benchmark --drop-rephrased` find that job's rows by text when the ids differ. {} where it
    cannot be read here (no path, on s3://, or gone since)."""
    from scoring.overlap.ngrams import text_key

    if not path or str(path).startswith("s3://"):
        return {}
    try:
        rows, _ = read_benchmark(path, text_field=text_field, require_label=False)
    except (FileNotFoundError, OSError):
        return {}
    return {r["id"]: text_key(r["input"]) for r in rows}
