"""Audit inputs → snippets, on the workers. The driver only plans which files each task reads.

A task reads its documents (jobs/parts/doc_inputs.py, streamed one row or file at a time), quarantines the bad ones,
cuts every document into seeded snippets (scoring/audits/corpus.py plan_snippets), optionally measures its n-gram overlap
with a reference corpus (the n-grams found there: jobs/parts/audit/reference_overlap.py), and writes under OUT/_staging/:

    snippets/{role}-{task}-{chunk}.jsonl   the scorer's input: {id: sid, input, label, bucket: role}
    meta/{role}-{task}-{chunk}.parquet     per snippet: sid, doc_id, role, label, index, start_word, n_words
    docs/{role}-{task}.parquet             per readable document: id, path, n_words, n-gram overlap
    quarantine/{role}-{task}.parquet       documents quarantined while reading (the shared schema + role, unit)

A snippet id (sid) is `t|{doc_id}#snippet{index}` for the target and `c|...` for calibration, so target and
calibration snippets can never collide and a quarantined sid names its role. Staging is deterministic (same input
and settings → byte-identical files), which is what lets the scoring step resume by parts.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator, Sequence

import pyarrow as pa

from curation.io.ledger import quarantine_table, reason_counts

ROLE_CODE = {"target": "t", "calibration": "c"}
ROLE_OF_CODE = {v: k for k, v in ROLE_CODE.items()}
SNIPPET_META_SCHEMA = pa.schema([("sid", pa.string()), ("doc_id", pa.string()), ("role", pa.string()),
                                 ("label", pa.int64()), ("index", pa.int64()), ("start_word", pa.int64()),
                                 ("n_words", pa.int64())])
DOC_META_SCHEMA = pa.schema([("id", pa.string()), ("role", pa.string()), ("path", pa.string()),
                             ("n_words", pa.int64()), ("ngram_n_ngrams", pa.int64()),
                             ("ngram_n_matched", pa.int64()), ("ngram_share", pa.float64()),
                             ("ngram_examples", pa.list_(pa.string()))])
TEXT_FILES_PER_TASK = 256
SNIPPETS_PER_FILE = 20_000  # a staged file becomes ~20 parts; workers hold one file's snippets at a time


def sid_of(role: str, doc_id: str, index: int) -> str:
    return f"{ROLE_CODE[role]}|{doc_id}#snippet{index}"


def public_id(sid: str) -> str:
    """The id users see for a snippet: `{doc_id}#snippet{index}`."""
    return sid[2:]


def plan_tasks(role: str, spec: str, *, id_prefix: str, label: int | None, whole: bool, **settings) -> list[dict]:
    """One task per row file, and one per TEXT_FILES_PER_TASK text files, in sorted file order. `label` is the
    role's fixed label (calibration folders), None to take each row's own (a labelled calibration benchmark), or
    -1 for the unlabelled target."""
    from jobs.parts.doc_inputs import ROW_SUFFIXES, document_files

    files, root = document_files(spec)
    groups: list[list[Path]] = []
    texts: list[Path] = []
    for f in files:
        if f.suffix.lower() in ROW_SUFFIXES:
            groups.append([f])
        else:
            texts.append(f)
    groups += [texts[i:i + TEXT_FILES_PER_TASK] for i in range(0, len(texts), TEXT_FILES_PER_TASK)]
    return [{"role": role, "task": k, "files": [str(f) for f in g], "root": None if root is None else str(root),
             "id_prefix": id_prefix, "label": label, "whole": whole, **settings} for k, g in enumerate(groups)]


def _snippets_of(task: dict, bad: list) -> Iterator[tuple[dict, list[dict]]]:
    """(document, its snippets with labels) per readable document; bad documents go to `bad`."""
    from jobs.parts.doc_inputs import iter_documents
    from scoring.audits.corpus import plan_snippets

    root = Path(task["root"]) if task["root"] else None
    docs = iter_documents([Path(f) for f in task["files"]], root, min_words=task["min_words"],
                          id_prefix=task["id_prefix"])
    for doc, q in docs:
        if doc is None:
            bad.append(q)
            continue
        label = task["label"]
        if label is None:  # a labelled calibration benchmark: the row's own label, 1 = member or 0 = non-member
            try:
                label = int(doc["label"])
                if label not in (0, 1) or float(doc["label"]) != label:
                    raise ValueError
            except (TypeError, ValueError):
                from curation.io.ledger import quarantine_record

                bad.append(quarantine_record(doc["id"], "read", "bad_label",
                                             f"label={doc['label']!r} (need 1 = member or 0 = non-member)"))
                continue
        snippets = plan_snippets(doc, task["snippets"], task["snippet_words"], task["seed"], whole=task["whole"])
        yield doc, [dict(s, label=label) for s in snippets]


def stage_task(task: dict, dest: str, ngram_index=None) -> dict:
    """Run one staging task (Ray-free); returns its counts and the files it wrote."""
    from curation.io.outputs import Location

    out = Location(dest)
    role, k = task["role"], task["task"]
    bad: list[dict] = []
    docs: list[dict] = []
    rows: list[dict] = []
    meta: list[dict] = []
    written: list[str] = []
    n_docs = n_snippets = 0

    def flush() -> None:
        if not rows:
            return
        name = f"{role}-{k:05d}-{len(written):04d}"
        out.write_bytes(f"_staging/snippets/{name}.jsonl",
                        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode())
        out.write_parquet(f"_staging/meta/{name}.parquet", pa.Table.from_pylist(meta, schema=SNIPPET_META_SCHEMA))
        written.append(name)
        rows.clear()
        meta.clear()

    for doc, snippets in _snippets_of(task, bad):
        n_docs += 1
        ov = ngram_index.overlap(doc["text"]) if ngram_index is not None else None
        docs.append({"id": doc["id"], "role": role, "path": doc["path"], "n_words": doc["n_words"],
                     "ngram_n_ngrams": ov and ov["n_ngrams"], "ngram_n_matched": ov and ov["n_matched"],
                     "ngram_share": ov and ov["share"], "ngram_examples": ov and ov["examples"]})
        for s in snippets:
            sid = sid_of(role, s["doc_id"], s["index"])
            # The scorer's reader needs a 0/1 label; the target's placeholder 0 is never read (role is the bucket).
            rows.append({"id": sid, "input": s["text"], "label": max(0, s["label"]), "bucket": role})
            meta.append({"sid": sid, "doc_id": s["doc_id"], "role": role, "label": s["label"], "index": s["index"],
                         "start_word": s["start_word"], "n_words": s["n_words"]})
            n_snippets += 1
            if len(rows) >= task.get("snippets_per_file", SNIPPETS_PER_FILE):
                flush()
    flush()
    out.write_parquet(f"_staging/docs/{role}-{k:05d}.parquet", pa.Table.from_pylist(docs, schema=DOC_META_SCHEMA))
    q = [dict(b, role=role, unit="document") for b in bad]
    out.write_parquet(f"_staging/quarantine/{role}-{k:05d}.parquet", quarantine_table(q, context=("role", "unit")))
    reasons = reason_counts(bad)
    return {"role": role, "task": k, "documents_in": n_docs + len(bad), "documents_ok": n_docs,
            "documents_quarantined": len(bad), "reasons": reasons, "snippets": n_snippets, "files": written}


def _stage(shared: dict, task: dict) -> dict:
    return stage_task(task, shared["dest"], shared["ngram_index"])


def run_staging(tasks: Sequence[dict], dest: str, ngram_index=None, progress: bool = True, *, runner) -> list[dict]:
    """Every task on `runner`: as a Ray task (the audited n-grams found in a reference corpus, if any, travel once
    through the object store), or here (jobs/plane/runners.LOCAL)."""
    done = list(runner.map(_stage, [{"task": t} for t in tasks], {"dest": dest, "ngram_index": ngram_index},
                           desc="snippets (staging)", progress=progress, num_cpus=0.5))
    return sorted(done, key=lambda s: (s["role"], s["task"]))


def fetch_texts(dest: str, wanted_by_file: dict[str, set[str]]) -> dict[str, str]:
    """The staged text of the wanted snippet ids (the report's evidence): one Ray task per staged file that holds
    any of them."""
    import ray

    def scan(name: str, want: list[str]) -> dict[str, str]:
        from curation.io.outputs import Location

        want_set, found = set(want), {}
        for line in Location(dest).read_bytes(f"_staging/snippets/{name}.jsonl").splitlines():
            row = json.loads(line)
            if row["id"] in want_set:
                found[row["id"]] = row["input"]
        return found

    remote = ray.remote(num_cpus=0.5)(scan)
    out: dict[str, str] = {}
    for part in ray.get([remote.remote(n, sorted(w)) for n, w in sorted(wanted_by_file.items()) if w]):
        out.update(part)
    return out
