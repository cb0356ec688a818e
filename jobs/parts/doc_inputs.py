"""Read the documents an audit runs on: a folder (recursive), a glob, a .txt file, or a jsonl/Parquet file of rows
(GSM8K-style `question`/`answer`, or `text`/`input`). Never crashes on a bad input: an unreadable or non-UTF-8
file, an empty document or a row without text becomes a quarantine row `{id, stage, reason, detail}`, so that
documents in = documents read + quarantined, always.

Used by `doc-mia`, `audit`, `unlearning-audit` and `contamination-study`.
"""
from __future__ import annotations

import glob
from pathlib import Path

from jobs.plane.benchmark_reader import jsonl_objects
from curation.io.ledger import quarantine_record

STAGE = "read"
TEXT_SUFFIXES = (".txt", ".md", ".text")
ROW_SUFFIXES = (".jsonl", ".parquet")


def _q(rid: str, reason: str, detail: str) -> dict:
    return quarantine_record(rid, STAGE, reason, detail)


def row_text(raw: dict) -> str | None:
    """The text of one row: `question` + `answer` (GSM8K style), else `text`, else `input`."""
    if isinstance(raw.get("question"), str):
        answer = raw.get("answer")
        return raw["question"] + ("\n" + answer if isinstance(answer, str) and answer.strip() else "")
    for key in ("text", "input"):
        if isinstance(raw.get(key), str):
            return raw[key]
    return None


def _rows_of(path: Path):
    """(id, text or None, raw row, quarantine row or None) per row of a jsonl or Parquet file."""
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):  # streamed, a batch at a time
            for raw in batch.to_pylist():
                n += 1
                yield str(raw.get("id") or f"{path.stem}:{n}"), row_text(raw), raw, None
        return
    for rid, raw, problem in jsonl_objects(path):
        yield (rid, None, None, _q(rid, *problem)) if problem else (rid, row_text(raw), raw, None)


def _files(spec: str) -> tuple[list[Path], Path | None]:
    """The files a spec names, and the root that document ids are relative to."""
    p = Path(spec)
    if p.is_dir():
        files = sorted(x for x in p.rglob("*") if x.is_file() and x.suffix.lower() in TEXT_SUFFIXES + ROW_SUFFIXES)
        return files, p
    if p.is_file():
        return [p], p.parent
    matches = sorted(Path(m) for m in glob.glob(spec, recursive=True) if Path(m).is_file())
    if not matches and not any(ch in spec for ch in "*?["):
        raise FileNotFoundError(f"{spec}: no such file or directory")
    return matches, None


def is_row_file(spec: str) -> bool:
    return Path(spec).is_file() and Path(spec).suffix.lower() in ROW_SUFFIXES


def read_documents(spec: str, *, min_words: int = 1, id_prefix: str = "") -> tuple[list[dict], list[dict]]:
    """Return (documents, quarantined). A document is {id, path, text, n_words, label}; every .txt file is one
    document and every jsonl/Parquet row is one document (`label` is the row's own, if any, else None). Documents
    with fewer than `min_words` words are quarantined."""
    files, root = document_files(spec)
    docs, quarantined = [], []
    for doc, bad in iter_documents(files, root, min_words=min_words, id_prefix=id_prefix):
        (docs if doc is not None else quarantined).append(doc if doc is not None else bad)
    return docs, quarantined


def document_files(spec: str) -> tuple[list[Path], Path | None]:
    """The files a spec names (and the root ids are relative to); an error when there is none."""
    files, root = _files(spec)
    if not files:
        raise FileNotFoundError(f"{spec}: no .txt/.md/.jsonl/.parquet documents found")
    return files, root


def iter_documents(files, root: Path | None, *, min_words: int = 1, id_prefix: str = ""):
    """(document, None) or (None, quarantine row) per document of `files`, streamed: one file's rows at a time,
    so a worker can turn a large row file into snippets without holding it."""
    seen: set[str] = set()

    def check(rid: str, path: Path, text: str | None, raw_detail: str = "", label=None):
        rid = id_prefix + rid
        if rid in seen:
            return None, _q(rid, "duplicate_id", "an earlier document has the same id")
        seen.add(rid)
        if text is None or not text.strip():
            return None, _q(rid, "empty", raw_detail or "no text")
        n_words = len(text.split())
        if n_words < min_words:
            return None, _q(rid, "too_short", f"{n_words} words < min_words={min_words}")
        return {"id": rid, "path": str(path), "text": text, "n_words": n_words, "label": label}, None

    for f in files:
        f = Path(f)
        rel = str(f.relative_to(root)) if root is not None and f.is_relative_to(root) else str(f)
        if f.suffix.lower() in ROW_SUFFIXES:
            try:
                for rid, text, raw, bad in _rows_of(f):
                    if bad is not None:
                        yield None, {**bad, "id": id_prefix + bad["id"]}
                        continue
                    yield check(rid, f, text, f"no question/answer, text or input field (keys: {sorted(raw)[:8]})",
                                raw.get("label"))
            except (OSError, ValueError) as exc:  # ValueError: pyarrow's ArrowInvalid for a corrupt Parquet file
                yield None, _q(id_prefix + rel, "unreadable", f"{type(exc).__name__}: {exc}")
            continue
        try:
            data = f.read_bytes()
        except OSError as exc:
            yield None, _q(id_prefix + rel, "unreadable", exc)
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield None, _q(id_prefix + rel, "not_utf8", exc)
            continue
        yield check(rel, f, text.lstrip("\ufeff"), "empty file")
