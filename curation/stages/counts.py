"""Counting a build: an additive tally per block, summed on the driver, turned into the manifest's counts and
reconciled against what was written.

Every document that enters leaves as kept or as one exclusion; after bucketing the unit becomes the benchmark row
(one document can give several rows). `counts["steps"]` records in / kept / dropped-per-reason for every step, and
`reconcile` fails the build unless each step adds up and the totals match the rows and exclusions written.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping

from curation.document import ReconcileError

DOCUMENT_STEPS = ("source", "cutoff", "title", "words", "code_formula", "language", "dedup", "bucket")
ROW_STEPS = ("sample",)
LABEL_NAMES = {1: "member", 0: "nonmember"}


def step_of(stage: str) -> str:
    """Sources name their own stages ("source.arxiv"); they count under the "source" step."""
    return stage.split(".", 1)[0]


@dataclass
class Tally:
    """What one block adds to the counts. Additive (`+=`), so blocks tallied on workers sum on the driver."""

    documents_in: int = 0
    by_step: Counter = field(default_factory=Counter)  # (step, reason) -> exclusions
    labels_dropped: Counter = field(default_factory=Counter)  # (step, label name) -> exclusions with a label
    survivors: Counter = field(default_factory=Counter)  # label name -> documents with at least one bucket row
    candidates: int = 0  # bucket rows
    bucketed_documents: int = 0
    sampled: Counter = field(default_factory=Counter)  # (label name, bucket) -> rows sampled
    sampled_months: Counter = field(default_factory=Counter)  # (month, bucket) -> non-member rows sampled
    repairs: Counter = field(default_factory=Counter)  # reason -> pieces a source removed from documents' text
    created_min: str | None = None
    created_max: str | None = None

    def exclude(self, stage: str, reason: str, label: int | None, n: int = 1) -> None:
        """Count `n` exclusions of one stage, reason and label."""
        step = step_of(stage)
        if step not in DOCUMENT_STEPS + ROW_STEPS:
            raise ReconcileError(f"an exclusion has unknown stage {stage!r}")
        self.by_step[(step, reason)] += n
        if step in DOCUMENT_STEPS and label is not None:
            self.labels_dropped[(step, LABEL_NAMES[label])] += n

    def sample(self, label: int, bucket: int, month: str) -> None:
        self.sampled[(LABEL_NAMES[label], int(bucket))] += 1
        if label != 1:
            self.sampled_months[(month, int(bucket))] += 1

    def __iadd__(self, other: "Tally") -> "Tally":
        self.documents_in += other.documents_in
        for name in ("by_step", "labels_dropped", "survivors", "sampled", "sampled_months", "repairs"):
            getattr(self, name).update(getattr(other, name))
        self.candidates += other.candidates
        self.bucketed_documents += other.bucketed_documents
        self.created_min = min(filter(None, (self.created_min, other.created_min)), default=None)
        self.created_max = max(filter(None, (self.created_max, other.created_max)), default=None)
        return self

    @property
    def excluded(self) -> int:
        return sum(self.by_step.values())

    @property
    def rows_out(self) -> int:
        return sum(self.sampled.values())


def count_steps(tally: Tally, monthly: bool = False) -> dict:
    """The manifest's counts from a build's tally."""
    by_step: dict[str, Counter] = {s: Counter() for s in DOCUMENT_STEPS + ROW_STEPS}
    for (step, reason), n in tally.by_step.items():
        by_step[step][reason] += n
    labels_dropped: dict[str, Counter] = {s: Counter() for s in DOCUMENT_STEPS}
    for (step, label), n in tally.labels_dropped.items():
        labels_dropped[step][label] += n

    # Labels of the documents that survive each step, from the last step backwards (labels exist after cutoff).
    survivors = Counter(tally.survivors)
    survivors_after: dict[str, dict] = {}
    for step in reversed(DOCUMENT_STEPS):
        survivors_after[step] = dict(sorted((k, v) for k, v in survivors.items() if v))
        survivors += labels_dropped[step]

    steps, n = [], tally.documents_in
    for step in DOCUMENT_STEPS:
        dropped = sum(by_step[step].values())
        entry = {"step": step, "unit": "documents", "in": n, "kept": n - dropped,
                 "dropped": dict(sorted(by_step[step].items()))}
        if DOCUMENT_STEPS.index(step) >= DOCUMENT_STEPS.index("cutoff"):
            entry["kept_by_label"] = survivors_after[step]
        steps.append(entry)
        n -= dropped
    steps[-1]["rows_out"] = tally.candidates
    dropped = sum(by_step["sample"].values())
    steps.append({"step": "sample", "unit": "rows", "in": tally.candidates, "kept": tally.candidates - dropped,
                  "dropped": dict(sorted(by_step["sample"].items()))})

    reasons: Counter = Counter()
    for counter in by_step.values():
        reasons.update(counter)
    counts = {
        "documents_in": tally.documents_in,
        "steps": steps,
        "dropped_by_reason": dict(sorted(reasons.items())),
        "excluded": tally.excluded,
        "documents_kept": steps[-2]["kept"],
        "rows_out": tally.rows_out,
        "by_label_bucket": by_label_bucket(tally.sampled),
        # markup a source removed from the text of documents it kept (what a reader of the page would not see)
        "source_repairs": dict(sorted(tally.repairs.items())),
    }
    if monthly:
        months: dict[str, dict[str, int]] = {}
        for (month, bucket), n in sorted(tally.sampled_months.items()):
            months.setdefault(month, {})[str(bucket)] = n
        counts["nonmembers_by_month_bucket"] = months
    return counts


def by_label_bucket(sampled: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """{"member": {"32": n, ...}, "nonmember": {...}}, buckets in increasing order."""
    out: dict[str, dict[str, int]] = {name: {} for name in ("member", "nonmember")}
    for (label, bucket), n in sorted(sampled.items(), key=lambda kv: kv[0][1]):
        if n:
            out[label][str(bucket)] = n
    return out


def reconcile(counts: Mapping[str, Any], tally: Tally, *, rows_written: int, excluded_written: int,
              duplicate_row_ids: int = 0) -> None:
    """Fail loudly unless every step adds up and the totals match what was written."""
    problems = []
    steps = counts["steps"]
    for step in steps:
        if step["in"] != step["kept"] + sum(step["dropped"].values()):
            problems.append(f"step {step['step']}: in {step['in']} != kept {step['kept']} + dropped")
    for before, after in zip(steps[:-2], steps[1:-1]):
        if before["kept"] != after["in"]:
            problems.append(f"{before['step']} kept {before['kept']} but {after['step']} got {after['in']}")
    if steps[-2]["kept"] != tally.bucketed_documents:
        problems.append(f"bucket kept {steps[-2]['kept']} documents, {tally.bucketed_documents} were bucketed")
    if steps[-2]["rows_out"] != steps[-1]["in"]:
        problems.append("bucket rows out != sample rows in")
    if steps[-1]["kept"] != rows_written:
        problems.append(f"sample kept {steps[-1]['kept']} rows, {rows_written} written")
    if sum(counts["dropped_by_reason"].values()) != excluded_written:
        problems.append(f"{sum(counts['dropped_by_reason'].values())} drops counted, {excluded_written} written")
    if duplicate_row_ids:
        problems.append(f"{duplicate_row_ids} benchmark row ids are not unique")
    if problems:
        raise ReconcileError("counts do not reconcile: " + "; ".join(problems))
