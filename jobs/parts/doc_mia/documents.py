"""doc-mia's documents on the scoring pool: parts of document files, read, tokenised and scored on the workers.

    DocPart (a group of files of one label) ──▶ PrepareDocuments (CPU pool): read the documents (jobs/parts/doc_inputs.py),
        quarantine the bad ones, tokenise each whole document
    ──▶ ScoreDocuments (the model's actor pool): whole-document stats for every context C (stride C − 1, GP sums
        when asked; scoring/audits/docmia/stats.py), then writes the part's files and returns its summary:

    OUT/doc_stats.parquet/part-NNNNN.parquet   per (document, C): token_ids, lp, lp_max, p_sum (GP), n_windows
    OUT/documents.parquet/part-NNNNN.parquet   per scored document: id, label, path, n_words, n_tokens, mean_lp per C
    OUT/quarantine.parquet/part-NNNNN.parquet  the shared quarantine schema (unreadable, empty, too_short, score_failed)

The stage classes import no Ray; the pool (jobs/plane/scoring_pool.py run_pipeline) runs them.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from curation.io.ledger import quarantine_record, quarantine_table, reason_counts
from jobs.plane.scoring_pool import ScoringSpec, to_ipc, from_ipc

DOC_PART_DIRS = ("doc_stats.parquet", "documents.parquet", "quarantine.parquet")
# Why the part loop does not row-isolate document parts: a document that fails to score is already quarantined
# by its part (score_failed, every context checked), so a failed pipeline is not one document's fault.
NOT_ISOLATED = ("a document that fails to score is quarantined by its part (score_failed); a failed pipeline is "
                "an actor or node failure, which a rerun resumes")
TEXT_FILES_PER_PART = 16  # books are long: a few per part keeps every actor busy and a resume cheap
READ_SCHEMA = pa.schema([("id", pa.string()), ("label", pa.int8()), ("path", pa.string()), ("n_words", pa.int64())])
DOCUMENTS_SCHEMA = READ_SCHEMA.append(pa.field("n_tokens", pa.int64())).append(
    pa.field("mean_lp", pa.list_(pa.float64())))  # mean log-likelihood per context, in the job's contexts order
TOKENS_SCHEMA = pa.schema([("id", pa.string()), ("token_ids", pa.list_(pa.int32()))])


@dataclass(frozen=True)
class DocPart:
    index: int
    label: int
    files: tuple[str, ...]
    root: str | None
    id_prefix: str
    min_words: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DocPart":
        d = json.loads(text)
        return cls(**{**d, "files": tuple(d["files"])})


def plan_doc_parts(members: str, nonmembers: str, min_words: int,
                   files_per_part: int = TEXT_FILES_PER_PART) -> list[DocPart]:
    """Members' parts then non-members', files in sorted order: one part per row file (jsonl/Parquet, a document
    per row) and one per `files_per_part` text files. Parts in index order list documents in reading order."""
    from jobs.parts.doc_inputs import ROW_SUFFIXES, document_files

    parts: list[DocPart] = []
    for label, spec, prefix in ((1, members, "member:"), (0, nonmembers, "nonmember:")):
        files, root = document_files(spec)
        groups: list[list[Path]] = []
        for f in files:  # in sorted order, so that documents keep their reading order
            is_rows = f.suffix.lower() in ROW_SUFFIXES
            text_group_open = groups and len(groups[-1]) < files_per_part and \
                groups[-1][-1].suffix.lower() not in ROW_SUFFIXES
            if is_rows or not text_group_open:
                groups.append([f])
            else:
                groups[-1].append(f)
        parts += [DocPart(len(parts) + k, label, tuple(str(f) for f in g), None if root is None else str(root),
                          prefix, min_words) for k, g in enumerate(groups)]
    return parts


def part_digest(part: DocPart) -> str:
    """What identifies a part's input: its files' names and content digests (jobs/kit/identity.py file_digest)."""
    from jobs.kit.identity import json_digest, file_digest

    return json_digest([part.to_json(), *[file_digest(Path(f)) for f in part.files]])


class PrepareDocuments:
    """A DocPart → its readable documents (rows), read-quarantine and whole-document token ids, as IPC bytes."""

    def __init__(self, spec: ScoringSpec):
        from scoring.lm.model import load_tokenizer

        self.tokenizer = load_tokenizer(spec.branches[0].model)
        self.tokenizer.model_max_length = 1 << 40  # whole documents on purpose; the scorer windows them

    def prepare(self, part_json: str) -> dict:
        from jobs.parts.doc_inputs import iter_documents

        part = DocPart.from_json(part_json)
        rows, bad = [], []
        root = Path(part.root) if part.root else None
        for doc, q in iter_documents([Path(f) for f in part.files], root, min_words=part.min_words,
                                     id_prefix=part.id_prefix):
            if doc is None:
                bad.append(q)
            else:
                rows.append({"id": doc["id"], "label": part.label, "path": doc["path"], "n_words": doc["n_words"],
                             "text": doc["text"]})
        enc = self.tokenizer([r["text"] for r in rows], add_special_tokens=True)["input_ids"] if rows else []
        docs = pa.Table.from_pylist([{k: r[k] for k in ("id", "label", "path", "n_words")} for r in rows],
                                    schema=READ_SCHEMA)
        tokens = pa.table({"id": [r["id"] for r in rows], "token_ids": enc}, schema=TOKENS_SCHEMA)
        return {"index": part.index, "rows": to_ipc(docs), "quarantine": to_ipc(quarantine_table(bad)),
                "tokens_0": to_ipc(tokens)}

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([self.prepare(p) for p in batch.column("part").to_pylist()])


class ScoreDocuments:
    """Whole-document stats for every context on one loaded model; writes the part's three files."""

    def __init__(self, spec: ScoringSpec, branch: int, threads: int | None, finish: dict | None = None,
                 contexts: Sequence[int] = (128,), with_gp: bool = False):
        import torch

        from curation.io.outputs import Location
        from scoring.audits.docmia.stats import document_scorers
        from scoring.lm.model import load_causal_lm

        if threads:
            torch.set_num_threads(threads)
        model = spec.branches[branch].model
        lm, _ = load_causal_lm(model, device=spec.device)
        self.scorers = document_scorers(lm, model, contexts, with_gp, spec.max_batch_size)
        self.contexts = [int(c) for c in contexts]
        self.dest = Location((finish or {})["dest"])

    def score(self, row: dict) -> dict:
        from scoring.audits.docmia.stats import DOC_STATS_SCHEMA, document_stats

        t0 = time.perf_counter()
        index = row["index"]
        docs, tokens = from_ipc(row["rows"]), from_ipc(row["tokens_0"])
        quarantined = from_ipc(row["quarantine"]).to_pylist()
        ids = tokens.column("id").to_pylist()
        stats = document_stats(self.scorers, ids, tokens.column("token_ids").to_pylist()) if ids else []
        by_doc: dict[str, list[dict]] = {}
        for r in stats:
            by_doc.setdefault(r["id"], []).append(r)
        keep_stats, keep_docs = [], []
        for doc in docs.to_pylist():
            rows = by_doc.get(doc["id"], [])
            err = next((f"C={r['context']}: {r['error']}" for r in rows if r["error"]), None) or next(
                (f"C={r['context']}: fewer than 2 predicted tokens" for r in rows if len(r["lp"]) < 2), None)
            if err:  # a document enters the grid only if every context scored it
                quarantined.append(quarantine_record(doc["id"], "score", "score_failed", err))
                continue
            keep_stats += rows
            keep_docs.append({**doc, "n_tokens": len(rows[0]["token_ids"]),
                              "mean_lp": [float(np.mean(np.asarray(r["lp"], dtype=np.float64))) for r in rows]})
        name = f"part-{index:05d}.parquet"
        files = {"doc_stats": self.dest.write_parquet(f"doc_stats.parquet/{name}",
                                                      pa.Table.from_pylist(keep_stats, schema=DOC_STATS_SCHEMA)),
                 "documents": self.dest.write_parquet(f"documents.parquet/{name}",
                                                      pa.Table.from_pylist(keep_docs, schema=DOCUMENTS_SCHEMA)),
                 "quarantine": self.dest.write_parquet(f"quarantine.parquet/{name}", quarantine_table(quarantined))}
        reasons = reason_counts(quarantined)
        vocab = max([max(r["token_ids"], default=-1) + 1 for r in keep_stats] +
                    [len(r["p_sum"]) for r in keep_stats if r["p_sum"] is not None] + [0])
        summary = {"index": index, "how": "streamed", "rows_in": len(keep_docs) + len(quarantined),
                   "scored": len(keep_docs), "quarantined": len(quarantined), "reasons": reasons, "vocab": vocab,
                   "tokens": sum(d["n_tokens"] for d in keep_docs), "score_write_s": round(time.perf_counter() - t0, 3),
                   "files": files}
        return summary

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.Table.from_pylist([{"index": r["index"], "summary": json.dumps(self.score(r))}
                                     for r in batch.to_pylist()])
