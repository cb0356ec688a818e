"""The texts `tidemark trace` follows back to the corpus: a text-only run's generations.parquet (one text per
generated sample), a jsonl or Parquet file of `id` and `text`, or one `--text`. Rows that cannot be traced go to the
quarantine with the reason (rows in = traced + quarantined)."""
from __future__ import annotations

import json
from pathlib import Path

STAGE = "trace"


def read_texts(generations: str | None, texts: str | None, text: str | None) -> tuple[list[dict], list[dict]]:
    """([{"id", "text", + carried fields}], quarantine records)."""
    from curation.io.ledger import quarantine_record

    if text is not None:
        rows = [{"id": "text", "text": text}]
    elif generations:
        rows = _generation_rows(generations)
    else:
        rows = _file_rows(texts)
    good, bad, seen = [], [], set()
    for k, r in enumerate(rows):
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
            continue
        seen.add(rid)
        good.append({**r, "id": rid})
    return good, bad


def _file_rows(path: str) -> list[dict]:
    from curation.io.outputs import local_copy

    with local_copy(path) as local:
        p = Path(local)
        if p.suffix == ".parquet" or p.is_dir():
            import pyarrow.parquet as pq

            table = pq.read_table(p)
            if "text" not in table.column_names:
                raise ValueError(f"{path}: no `text` column (columns: {', '.join(table.column_names)})")
            cols = [c for c in ("id", "text") if c in table.column_names]
            return table.select(cols).to_pylist()
        rows = []
        with open(p, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    rows.append({"id": f"line{n}", "_problem": ("bad_json", f"line {n}: {exc}")})
                    continue
                if not isinstance(rec, dict):
                    rows.append({"id": f"line{n}", "_problem": ("bad_json", f"line {n}: not an object")})
                    continue
                rows.append({"id": rec.get("id", f"line{n}"), "text": rec.get("text")})
        return rows


def _generation_rows(path: str) -> list[dict]:
    """One row per generated sample of an evaluate OUT (or its generations.parquet): id `ROW/KIND/SAMPLE`, with the
    benchmark row, the prompt kind and the sample carried; a request that produced no text is quarantined."""
    import pyarrow.parquet as pq

    from curation.io.outputs import local_copy

    spec = path.rstrip("/")
    if not spec.endswith("generations.parquet"):
        spec += "/generations.parquet"
    with local_copy(spec) as local:
        table = pq.read_table(local, columns=["id", "kind", "sample", "text", "error"])
    rows = []
    for r in table.to_pylist():
        rid = f"{r['id']}/{r['kind']}/{r['sample']}"
        row = {"id": rid, "text": r["text"], "row_id": r["id"], "kind": r["kind"], "sample": r["sample"]}
        if r["sample"] is None or r["sample"] < 0:
            row["_problem"] = ("no_generation", (r.get("error") or "the request produced no text")[:300])
        rows.append(row)
    return rows
