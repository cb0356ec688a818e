"""The balanced sample as the build computes it (curation/stages/sampling.py), over rows in memory cut into blocks: the
tests' way to call the passes with balanced_sample's old signature."""
from __future__ import annotations

from collections import Counter

from curation.stages import sampling


def balanced_sample(rows: list[dict], *, per_bucket, seed: int, balance: bool = True, monthly_nonmembers=False,
                    per_month=None, blocks: int = 1):
    """The sampling passes over `rows` cut into `blocks` blocks: counts, ranks merged across blocks, thresholds,
    then each row alone. Returns (kept rows, [(row, reason, detail)])."""
    def group(r):
        return sampling.group_of(r["bucket"], r["label"], r["month"], monthly_nonmembers)

    counts = Counter(group(r) for r in rows)
    plans = sampling.plan_sample(counts, per_bucket=per_bucket, balance=balance,
                                 monthly_nonmembers=monthly_nonmembers, per_month=per_month)
    needed = {g: p.needed for g, p in plans.items() if p.needed}
    smallest: dict = {}
    for b in range(blocks):
        ranks: dict = {}
        for r in rows[b::blocks]:
            ranks.setdefault(group(r), []).append(sampling.sample_rank(seed, r["document_id"]))
        sampling.merge_smallest(smallest, sampling.smallest_ranks(ranks, needed), needed)
    limits = sampling.thresholds(plans, smallest)
    kept, dropped = [], []
    for r in rows:
        verdict = sampling.decide(sampling.sample_rank(seed, r["document_id"]), plans[group(r)], limits[group(r)])
        if verdict is None:
            kept.append(r)
        else:
            dropped.append((r, *verdict))
    return kept, dropped
