"""What the audit's driver does with the scores: Arrow and numpy over score columns (~100 bytes a snippet) and
per-document metadata, never the snippets' texts (except the few the report quotes as evidence).

    scores.parquet/ (sid, label, bucket = role, one detector)  ─┐
    _staging/docs/ (per document: path, words, n-gram overlap)  ─┼─▶ per-document rates, documents.parquet
    _staging/meta/ (per snippet: doc, index, start word)        ─┘─▶ snippets.parquet/, evidence for the report
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.parts.audit.snippets import ROLE_CODE, ROLE_OF_CODE, public_id
from curation.io.ledger import first_occurrences, quarantine_record
from jobs.plane.part_store import read_parts
from curation.io.outputs import Location

SID_PATTERN = r"^[tc]\|(?P<doc>.*)#snippet(?P<index>[0-9]+)$"  # greedy: the last `#snippet` ends the doc id


@dataclass
class RoleScores:
    """One role's scored snippets: ids, their document codes (0.. in sorted document-id order, so cluster
    bootstraps draw documents exactly as with the ids themselves), scores and labels. `nan_ids` are the
    snippets whose detector score is NaN (quarantined as no_score)."""

    ids: pa.Array
    doc_ids: pa.Array
    codes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    nan_ids: list[str]

    @property
    def n_docs(self) -> int:
        return len(self.doc_ids)


def role_scores(scores: pa.Table, column: str, role: str) -> RoleScores:
    """One role's rows of the scores table (the role is the sid's first letter, so no bucket column is read)."""
    t = scores.filter(pc.starts_with(scores["id"], pattern=f"{ROLE_CODE[role]}|"))
    s = np.asarray(t[column].to_numpy(), dtype=np.float64)
    finite = np.isfinite(s)
    nan_ids = t["id"].filter(pa.array(~finite)).to_pylist()
    t = t.filter(pa.array(finite))
    ids = t["id"].combine_chunks()
    doc = pc.struct_field(pc.extract_regex(ids, SID_PATTERN), "doc")
    uniq = pc.unique(doc)
    uniq = uniq.take(pc.array_sort_indices(uniq))
    codes = np.asarray(pc.index_in(doc, value_set=uniq).to_numpy(), dtype=np.int64)
    return RoleScores(ids, uniq, codes, s[finite], np.asarray(t["label"].to_numpy(), dtype=np.int64), nan_ids)


def documents_table(stage: Location, role: str, rs: RoleScores, threshold: float, ci: str):
    """(scored documents with their rates in input order, ids of documents with no scored snippet, ids of later
    duplicates of a document id). Duplicates across staging tasks keep the first; their snippets were
    quarantined as duplicate ids by the scoring survey. Ids are matched with index_in over sorted ids and the
    rest is numpy (a hash join and group-by cost ~1 KB a document in the driver)."""
    from scoring.audits.corpus import rates_by_document

    docs = read_parts(stage, "_staging/docs", prefix=f"{role}-")
    keep = first_occurrences(docs["id"])
    duplicates = docs["id"].filter(pa.array(~keep)).to_pylist()
    docs = docs.filter(pa.array(keep))
    rates = rates_by_document(rs.codes, rs.scores, threshold, rs.n_docs, ci)
    at = pc.index_in(docs["id"], value_set=rs.doc_ids)  # the document's code in rs, null when nothing scored
    scored_mask = np.asarray(pc.is_valid(at).to_numpy(zero_copy_only=False), dtype=bool)
    unscored = docs["id"].filter(pa.array(~scored_mask)).to_pylist()
    scored = docs.filter(pa.array(scored_mask))
    take = np.asarray(at.filter(pa.array(scored_mask)).to_numpy(), dtype=np.int64)
    for name, values in rates.items():
        scored = scored.append_column(name, pa.array(values[take]))
    return scored, unscored, duplicates


def report_rows(documents: pa.Table, cap: int) -> pa.Table:
    """The documents listed in report.json: all of them up to `cap`, else the `cap` with the highest max score."""
    if documents.num_rows <= cap:
        return documents
    key = pc.fill_null(documents["max_score"], -np.inf)
    order = pc.array_sort_indices(pc.negate(key), null_placement="at_end")
    return documents.take(order[:cap])


def snippet_pass(stage: Location, names, roles: dict[str, RoleScores], threshold: float, wanted: set[str],
                 out_dir) -> dict:
    """One staged meta file at a time (each holds one role's snippets): write snippets.parquet/ parts (score null
    when not scored) and collect the words of scored snippets per role and where the wanted (evidence) snippets
    are. Scores come from the roles' arrays: the scores table itself is gone by now."""
    import pyarrow.parquet as pq

    out_dir.mkdir(parents=True, exist_ok=True)
    words: dict[str, list[np.ndarray]] = {role: [] for role in roles}
    where: dict[str, dict] = {}
    for name in names:
        meta = stage.read_parquet(f"_staging/meta/{name}.parquet")
        role = name.split("-", 1)[0]
        rs = roles[role]
        at = pc.index_in(meta["sid"], value_set=rs.ids)  # null where the snippet has no finite score
        score = pc.take(pa.array(rs.scores), at)
        flagged = pc.greater_equal(score, pa.scalar(threshold, pa.float64()))
        pq.write_table(pa.table({"doc_id": meta["doc_id"], "role": meta["role"], "label": meta["label"],
                                 "index": meta["index"], "start_word": meta["start_word"], "n_words": meta["n_words"],
                                 "score": score, "flagged": flagged}), out_dir / f"part-{name}.parquet")
        words[role].append(meta["n_words"].filter(pc.is_valid(score)).to_numpy())
        if wanted:
            t = meta.select(["sid", "index", "start_word"])
            for r in t.filter(pc.is_in(t["sid"], value_set=pa.array(sorted(wanted)))).to_pylist():
                where[r["sid"]] = {"file": name, "index": r["index"], "start_word": r["start_word"]}
    return {"words": {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in words.items()},
            "where": where}


def snippet_quarantine(scoring: Location, targets: RoleScores, calib: RoleScores, column: str) -> list[dict]:
    """Snippets the scorer quarantined (read problems, duplicates, failures), and those whose score is NaN."""
    out = []
    q = read_parts(scoring, "quarantine.parquet")
    for r in (q.to_pylist() if q is not None else []):
        out.append({**r, "id": public_id(r["id"]), "role": ROLE_OF_CODE.get(r["id"][:1], "target"),
                    "unit": "snippet"})
    for rs, role in ((targets, "target"), (calib, "calibration")):
        out += [dict(quarantine_record(public_id(i), "score", "no_score", f"{column} is NaN (too few tokens?)"),
                     role=role, unit="snippet") for i in rs.nan_ids]
    return out
