"""`build-benchmark --drop-rephrased OUT`: the release rows that an `overlap --semantic` run found rephrased in a
model's corpus, decided over the sampled rows (curation/release/output.py runs it as one task, like debias).

Which rows go. A non-member must not be in the model's training data, so a non-member the overlap flagged
(`rephrased` in semantic.parquet) is a mislabelled row: it is dropped, stage `rephrased`, reason
`rephrased_in_corpus`, with the overlap OUT, the corpus document and the characters of the passage in the detail.
A flagged member is kept: members are in the training data by design, and a rephrase there agrees with its label
(a corpus recipe's members are the corpus itself: dropping them would empty the release); the record counts them.

How an overlap's rows find the release's (per OUT). By id where any id matches: the overlap read a build of this
release, whose row ids (`<document id>@<bucket>`) a rebuild of the same config and input gives again. Else by
text: the overlap benchmark's text and the row's `input`, both reduced to their lowercased `\\w+` words and hashed
(scoring/overlap/ngrams.text_key). An OUT none of whose rows joins either way was run on another benchmark: an
error. Release rows no overlap row joins were not checked: kept, and counted in the record.

Why after sampling, not before: the rows dropped are rows the overlap checked. Dropping before sampling would let
the sampler refill their places with rows nobody checked. The release is smaller by what was dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa

from scoring.overlap.ngrams import text_key

STAGE = "rephrased"
REASON = "rephrased_in_corpus"
# one row per overlap row: its id, the text key of its benchmark text (null where that could not be read), its
# decision, and for a flagged row where the passage is (the exclusion's detail)
OVERLAP_SCHEMA = pa.schema([("id", pa.string()), ("key", pa.uint64()), ("rephrased", pa.bool_()),
                            ("detail", pa.string())])
RULE = ("a non-member that an overlap --semantic run over this release flagged as rephrased in the model's corpus "
        "is dropped (reason rephrased_in_corpus); flagged members are kept and counted; rows joined by id, else by "
        "their text's lowercased words")


class RephrasedDropError(ValueError):
    """--drop-rephrased cannot be applied: the message (one line) says why and what to do."""


@dataclass(frozen=True)
class RephrasedOverlap:
    """One overlap OUT as the build needs it: its rows (OVERLAP_SCHEMA) and the facts of its semantic pass."""

    path: str
    table: pa.Table
    facts: dict = field(default_factory=dict)


def _join(rows: Sequence[dict], overlap: RephrasedOverlap) -> tuple[str, int, dict[str, str]]:
    """(how the overlap's rows joined the release's: id or text, release rows joined, flagged release row id →
    the flagged overlap row's detail)."""
    t = overlap.table
    ids, keys, flags, details = (t.column(c).to_pylist() for c in ("id", "key", "rephrased", "detail"))
    by_id = {i: (bool(f), d) for i, f, d in zip(ids, flags, details)}
    joined = [r["id"] for r in rows if r["id"] in by_id]
    if joined:
        return "id", len(joined), {i: by_id[i][1] for i in joined if by_id[i][0]}
    by_key: dict[int, tuple[bool, str | None]] = {}
    for k, f, d in zip(keys, flags, details):
        if k is not None and not by_key.get(k, (False, None))[0]:  # one text held twice: flagged if either is
            by_key[k] = (bool(f), d)
    row_keys = [(r["id"], text_key(r["input"])) for r in rows]
    joined_keys = [(i, k) for i, k in row_keys if k in by_key]
    if not joined_keys:
        unread = "" if t.column("key").null_count < t.num_rows else ", whose texts could not be read here"
        raise RephrasedDropError(
            f"--drop-rephrased {overlap.path}: none of its {t.num_rows:,} rows is a row of this release, by id or by "
            f"text (its benchmark: {overlap.facts.get('benchmark') or 'unknown'}{unread}); run `tidemark overlap "
            "--semantic` with this release as --benchmark")
    return "text", len(joined_keys), {i: by_key[k][1] for i, k in joined_keys if by_key[k][0]}


def drop_rephrased(rows: Sequence[dict], overlaps: Sequence[RephrasedOverlap]) -> tuple[list, list, dict]:
    """(kept rows, dropped rows as {id, reason, detail}, the manifest's record) over the sampled rows."""
    flagged: dict[str, list[str]] = {}
    per_out = []
    labels = {r["id"]: r["label"] for r in rows}
    for ov in overlaps:
        how, joined, hits = _join(rows, ov)
        for rid, detail in hits.items():
            flagged.setdefault(rid, []).append(f"{ov.path}: {detail}")
        members = sum(labels[rid] == 1 for rid in hits)
        per_out.append({**ov.facts, "overlap": ov.path, "overlap_rows": ov.table.num_rows,
                        "overlap_flagged": sum(ov.table.column("rephrased").to_pylist()), "join": how,
                        "rows_joined": joined, "rows_not_checked": len(rows) - joined,
                        "flagged_nonmembers": len(hits) - members, "flagged_members_kept": members})
    kept, dropped = [], []
    for r in rows:
        if r["id"] in flagged and r["label"] == 0:
            dropped.append({"id": r["id"], "reason": REASON, "detail": "; ".join(flagged[r["id"]])[:300]})
        else:
            kept.append(r)
    record = {"rule": RULE, "rows_in": len(rows), "dropped": len(dropped),
              "flagged_members_kept": sum(labels[i] == 1 for i in flagged), "overlaps": per_out}
    return kept, dropped, record
