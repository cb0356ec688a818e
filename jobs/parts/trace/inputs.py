"""The texts `tidemark trace` follows back to the corpus: a text-only run's generations.parquet (one text per
generated sample), a jsonl or Parquet file of `id` and `text`, or one `--text`. Read as a stream, in chunks: the
driver holds one chunk's texts at a time (and every id, to refuse a duplicate). Rows that cannot be traced go to the
quarantine with the reason (rows in = traced + quarantined)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

STAGE = "trace"
BATCH_ROWS = 4096  # Parquet rows read at a time


def text_chunks(generations: str | None, texts: str | None, text: str | None, size: int,
                requester_pays: bool = False) -> Iterator[tuple[list[dict], list[dict]]]:
    """Per chunk of at most `size` input rows: ([{"id", "text", + carried fields}], quarantine records).
    `requester_pays`: an s3:// input is read with RequestPayer=requester."""
    from curation.io.ledger import quarantine_record

    if text is not None:
        raw: Iterator[dict] = iter([{"id": "text", "text": text}])
    elif generations:
        raw = _generation_rows(generations, requester_pays)
    else:
        raw = _file_rows(texts, requester_pays)
    seen: set[str] = set()
    good, bad, n = [], [], 0
    for k, r in enumerate(raw):
        rid = r.get("id")
        rid = str(rid) if rid not in (None, "") else f"row{k}"
        problem = r.pop("_problem", None)
        if problem is None:
            if not isinstance(r.get("text"), str):
                problem = ("no_text", f"text is {type(r.get('text')).__name__}, not a string")
            elif not any(ch.isalnum() or ch == "_" for ch in r["text"]):
                problem = ("no_words", "the text has no \\w word to trace")
            elif rid in seen:
                problem = ("duplicate_id", f"id {rid!r} is given twice; ids name the texts in spans.parquet")
        if problem:
            bad.append(quarantine_record(rid, STAGE, *problem))
        else:
            seen.add(rid)
            good.append({**r, "id": rid})
        n += 1
        if n == size:
            yield good, bad
            good, bad, n = [], [], 0
    if n:
        yield good, bad


def read_texts(generations: str | None, texts: str | None, text: str | None, requester_pays: bool = False
               ) -> tuple[list[dict], list[dict]]:
    """Every row at once: (rows, quarantine records)."""
    good, bad = [], []
    for g, b in text_chunks(generations, texts, text, 1 << 30, requester_pays):
        good += g
        bad += b
    return good, bad


def _file_rows(path: str, requester_pays: bool = False) -> Iterator[dict]:
    from curation.io.outputs import local_copy

    with local_copy(path, requester_pays=requester_pays) as local:
        p = Path(local)
        if p.suffix == ".parquet" or p.is_dir():
            import pyarrow.dataset as ds

            data = ds.dataset(p, format="parquet")
            if "text" not in data.schema.names:
                raise ValueError(f"{path}: no `text` column (columns: {', '.join(data.schema.names)})")
            cols = [c for c in ("id", "text") if c in data.schema.names]
            for batch in data.to_batches(columns=cols, batch_size=BATCH_ROWS):
                yield from batch.to_pylist()
            return
        with open(p, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield {"id": f"line{n}", "_problem": ("bad_json", f"line {n}: {exc}")}
                    continue
                if not isinstance(rec, dict):
                    yield {"id": f"line{n}", "_problem": ("bad_json", f"line {n}: not an object")}
                    continue
                yield {"id": rec.get("id", f"line{n}"), "text": rec.get("text")}


def _generation_rows(path: str, requester_pays: bool = False) -> Iterator[dict]:
    """One row per generated sample of an evaluate OUT (or its generations.parquet): id `ROW/KIND/SAMPLE`, with the
    benchmark row, the prompt kind and the sample carried; a request that produced no text is quarantined."""
    import pyarrow.dataset as ds

    from curation.io.outputs import local_copy

    spec = path.rstrip("/")
    if not spec.endswith("generations.parquet"):
        spec += "/generations.parquet"
    with local_copy(spec, requester_pays=requester_pays) as local:
        data = ds.dataset(local, format="parquet")
        for batch in data.to_batches(columns=["id", "kind", "sample", "text", "error"], batch_size=BATCH_ROWS):
            for r in batch.to_pylist():
                rid = f"{r['id']}/{r['kind']}/{r['sample']}"
                row = {"id": rid, "text": r["text"], "row_id": r["id"], "kind": r["kind"], "sample": r["sample"]}
                if r["sample"] is None or r["sample"] < 0:
                    row["_problem"] = ("no_generation", (r.get("error") or "the request produced no text")[:300])
                yield row
