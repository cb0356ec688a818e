"""Balanced, seeded sampling from counts and ranks, so that no step needs the candidate rows in one place.

A candidate row (a document in one length bucket) belongs to a group: (bucket, label, month), where month is the
month of creation for non-members when `monthly_nonmembers` is on and "" otherwise. Within a group rows are taken
in the order of a seeded hash of their document id (`sample_rank`), so the release is a function of the config and
the input alone, and the same document ranks the same in every bucket (selections nest).

Two passes over keys:
1. count the rows per group (`group_of` on every candidate; sums are additive across blocks);
   `plan_sample` turns the counts into how many rows each group keeps (`keep`) and, for monthly groups, where the
   per-month cap falls (`cap`);
2. per group, the `needed` smallest ranks (additive: merge each block's smallest); `thresholds` reads off the rank
   of the last kept row and of the last row under the cap.
Then every row decides alone (`decide`): kept, `not_sampled` or `month_quota`, with the same detail strings as
the release has always recorded.

The rule, per bucket: members and non-members each in rank order; with `balance`, as many of each as the smaller
side has, capped at `per_bucket`. Monthly non-members: each month's rows in rank order, at most `per_month` per
month, taken round-robin over months in calendar order (a month with fewer rows drops out of later rounds).
"""
from __future__ import annotations

import hashlib
import heapq
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

MEMBER, NONMEMBER = 1, 0

Group = tuple[int, int, str]  # (bucket, label, month or "")


def sample_rank(seed: int, document_id: str) -> str:
    """Order-free, seeded rank: the same document ranks the same in every bucket, so selections nest."""
    return hashlib.sha256(f"{seed}\x00{document_id}".encode("utf-8")).hexdigest()


def group_of(bucket: int, label: int, month: str, monthly_nonmembers: bool) -> Group:
    return int(bucket), int(label), (month if monthly_nonmembers and label == NONMEMBER else "")


@dataclass(frozen=True)
class GroupPlan:
    count: int  # candidate rows in the group
    keep: int  # rows kept: the `keep` smallest ranks
    cap: Optional[int]  # monthly groups: rows at or past this position are month_quota drops
    not_sampled_detail: str
    month_quota_detail: str = ""

    @property
    def needed(self) -> int:
        """How many of the smallest ranks the thresholds need."""
        want = self.keep if 0 < self.keep < self.count else 0
        if self.cap is not None and self.cap < self.count:
            want = max(want, self.cap)
        return want


def _round_robin_takes(sizes: list[int], quota: int) -> list[int]:
    """How many of each queue the first `quota` items of a round-robin over the queues are (queues in order,
    one item from each non-empty queue per round)."""
    quota = min(quota, sum(sizes))
    lo, hi = 0, max(sizes, default=0)
    while lo < hi:  # the most complete rounds that fit in the quota
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in sizes) <= quota:
            lo = mid
        else:
            hi = mid - 1
    takes = [min(s, lo) for s in sizes]
    left = quota - sum(takes)
    for i, s in enumerate(sizes):  # the partial round, in queue order
        if left and s > lo:
            takes[i] += 1
            left -= 1
    return takes


def plan_sample(counts: Mapping[Group, int], *, per_bucket: int | None, balance: bool = True,
                monthly_nonmembers: bool = False, per_month: int | None = None) -> dict[Group, GroupPlan]:
    """Per group, how many rows it keeps (see the module docstring for the rule)."""
    plans: dict[Group, GroupPlan] = {}
    for bucket in sorted({g[0] for g in counts}):
        members = counts.get((bucket, MEMBER, ""), 0)
        months = sorted(m for (b, label, m) in counts if b == bucket and label == NONMEMBER)
        capped = {m: counts[(bucket, NONMEMBER, m)] for m in months}
        if monthly_nonmembers and per_month is not None:
            capped = {m: min(n, per_month) for m, n in capped.items()}
        quota = {MEMBER: members, NONMEMBER: sum(capped.values())}
        if balance:
            quota = dict.fromkeys(quota, min(quota.values()))
        if per_bucket is not None:
            quota = {k: min(v, per_bucket) for k, v in quota.items()}

        def detail(label: int, available: int) -> str:
            return f"bucket={bucket} label={label} quota={quota[label]} available={available}"

        if members:
            plans[(bucket, MEMBER, "")] = GroupPlan(members, quota[MEMBER], None, detail(MEMBER, members))
        if monthly_nonmembers:
            takes = _round_robin_takes([capped[m] for m in months], quota[NONMEMBER])
            for m, take in zip(months, takes):
                plans[(bucket, NONMEMBER, m)] = GroupPlan(
                    counts[(bucket, NONMEMBER, m)], take, capped[m], detail(NONMEMBER, sum(capped.values())),
                    f"bucket={bucket} month={m} per_month={per_month}")
        elif months:
            n = counts[(bucket, NONMEMBER, "")]
            plans[(bucket, NONMEMBER, "")] = GroupPlan(n, quota[NONMEMBER], None, detail(NONMEMBER, n))
    return plans


def smallest_ranks(ranks_by_group: Mapping[Group, Iterable[str]], needed: Mapping[Group, int]
                   ) -> dict[Group, list[str]]:
    """Per group, its `needed` smallest ranks, sorted: what one block contributes, and how blocks merge."""
    return {g: heapq.nsmallest(needed[g], ranks) for g, ranks in ranks_by_group.items() if needed.get(g)}


def merge_smallest(into: dict[Group, list[str]], more: Mapping[Group, list[str]], needed: Mapping[Group, int]) -> None:
    for g, ranks in more.items():
        into[g] = list(heapq.merge(into.get(g, []), ranks))[: needed[g]]


@dataclass(frozen=True)
class Thresholds:
    keep: Optional[str]  # the largest kept rank ("" keeps none, None keeps all)
    cap: Optional[str]  # the largest rank under the per-month cap (None: no row is over it)


def thresholds(plans: Mapping[Group, GroupPlan], smallest: Mapping[Group, list[str]]) -> dict[Group, Thresholds]:
    out = {}
    for g, plan in plans.items():
        ranks = smallest.get(g, [])
        if len(ranks) < plan.needed:
            raise ValueError(f"group {g}: {len(ranks)} ranks found, {plan.needed} needed (the passes disagree)")
        keep = "" if plan.keep == 0 else (None if plan.keep >= plan.count else ranks[plan.keep - 1])
        cap = ranks[plan.cap - 1] if plan.cap is not None and plan.cap < plan.count else None
        out[g] = Thresholds(keep, cap)
    return out


def decide(rank: str, plan: GroupPlan, limits: Thresholds) -> tuple[str, str] | None:
    """None when the row is sampled, else (reason, detail)."""
    if limits.keep is None or (limits.keep and rank <= limits.keep):
        return None
    if limits.cap is not None and rank > limits.cap:
        return "month_quota", plan.month_quota_detail
    return "not_sampled", plan.not_sampled_detail
