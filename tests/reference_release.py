"""The first version's global steps, kept only as the reference the partitioned ones are checked against: one
oldest-first pass over every row for dedup (curation/stages/dedup.py before issue 15) and one in-memory sort per bucket
for the balanced sample (curation/stages/filters.py before issue 15). Not used by the tool."""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from curation.stages.dedup import band_keys, similarity
from curation.document import utc
from curation.stages.sampling import MEMBER, NONMEMBER, sample_rank

Row = dict[str, Any]


def duplicate_decisions(rows: Sequence[dict[str, Any]], *, exact: bool = True, near: bool = False,
                        threshold: float = 0.8, bands: int = 16) -> list[tuple[str, str] | None]:
    """For each row (same order): None to keep it, or (reason, detail) to drop it. Reasons: duplicate_id (a
    source gave two documents one id), exact_duplicate, near_duplicate. Rows need id and created_at, plus
    exact_key / minhash for the checks asked for."""
    order = sorted(range(len(rows)), key=lambda i: (utc(rows[i]["created_at"]), rows[i]["id"]))
    seen_ids: set[str] = set()
    exact_keep: dict[str, str] = {}
    band_index: dict[bytes, list[str]] = {}
    signatures: dict[str, bytes] = {}
    decisions: list[tuple[str, str] | None] = [None] * len(rows)
    for i in order:
        r, rid = rows[i], rows[i]["id"]
        if rid in seen_ids:
            decisions[i] = ("duplicate_id", "another document has this id")
            continue
        seen_ids.add(rid)
        if exact:
            first = exact_keep.setdefault(r["exact_key"], rid)
            if first != rid:
                decisions[i] = ("exact_duplicate", f"same text as {first}")
                continue
        if near:
            keys = band_keys(r["minhash"], bands)
            match = _near_match(r["minhash"], keys, band_index, signatures, threshold)
            if match is not None:
                decisions[i] = ("near_duplicate", f"similar to {match[0]} (jaccard~{match[1]:.2f})")
                continue
            signatures[rid] = r["minhash"]
            for key in keys:
                band_index.setdefault(key, []).append(rid)
    return decisions


def _near_match(sig: bytes, keys: list[bytes], band_index: dict[bytes, list[str]], signatures: dict[str, bytes],
                threshold: float) -> tuple[str, float] | None:
    candidates = sorted({other for key in keys for other in band_index.get(key, ())})
    for other in candidates:
        sim = similarity(sig, signatures[other])
        if sim >= threshold:
            return other, sim
    return None



def balanced_sample(rows: list[Row], *, per_bucket: int | None, seed: int, balance: bool = True,
                    monthly_nonmembers: bool = False, per_month: int | None = None
                    ) -> tuple[list[Row], list[tuple[Row, str, str]]]:
    """Per bucket: members and non-members in seeded rank order; with `balance`, as many of each as the smaller
    side has (capped at `per_bucket`). With `monthly_nonmembers`, non-members are taken round-robin across months
    of creation (optionally at most `per_month` each), so a window of months is covered evenly.
    Returns (kept rows, [(row, reason, detail)] for the rest)."""
    by_bucket: dict[int, dict[int, list[Row]]] = defaultdict(lambda: {MEMBER: [], NONMEMBER: []})
    for r in rows:
        by_bucket[r["bucket"]][r["label"]].append(r)
    kept: list[Row] = []
    dropped: list[tuple[Row, str, str]] = []
    for bucket in sorted(by_bucket):
        members = sorted(by_bucket[bucket][MEMBER], key=lambda r: sample_rank(seed, r["document_id"]))
        nonmembers = sorted(by_bucket[bucket][NONMEMBER], key=lambda r: sample_rank(seed, r["document_id"]))
        if monthly_nonmembers:
            nonmembers, over = _round_robin_months(nonmembers, per_month)
            dropped.extend((r, "month_quota", f"bucket={bucket} month={r['month']} per_month={per_month}")
                           for r in over)
        quota = {MEMBER: len(members), NONMEMBER: len(nonmembers)}
        if balance:
            quota = dict.fromkeys(quota, min(quota.values()))
        if per_bucket is not None:
            quota = {k: min(v, per_bucket) for k, v in quota.items()}
        for label, ranked in ((MEMBER, members), (NONMEMBER, nonmembers)):
            kept.extend(ranked[: quota[label]])
            detail = f"bucket={bucket} label={label} quota={quota[label]} available={len(ranked)}"
            dropped.extend((r, "not_sampled", detail) for r in ranked[quota[label]:])
    return kept, dropped


def _round_robin_months(ranked: list[Row], per_month: int | None) -> tuple[list[Row], list[Row]]:
    months: dict[str, list[Row]] = defaultdict(list)
    for r in ranked:
        months[r["month"]].append(r)
    over: list[Row] = []
    if per_month is not None:
        for month, rs in months.items():
            months[month], extra = rs[:per_month], rs[per_month:]
            over.extend(extra)
    order: list[Row] = []
    queues = [months[m] for m in sorted(months)]
    for i in range(max((len(q) for q in queues), default=0)):
        order.extend(q[i] for q in queues if i < len(q))
    return order, over
