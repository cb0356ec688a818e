"""One quarantine schema and one row ledger for every job.

A row that cannot be used is never dropped: it becomes a quarantine record `{id, stage, reason, detail}` (reason
is a short counter name such as `bad_json`, detail is the human-readable why, cut to 300 characters). Every job
counts `in = out + quarantined` and refuses to finish when the counts do not reconcile.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Mapping

import pyarrow as pa

from curation.document import QUARANTINE_SCHEMA, ReconcileError

DETAIL_CHARS = 300


def quarantine_record(rid: str, stage: str, reason: str, detail: str = "") -> dict:
    return {"id": str(rid), "stage": stage, "reason": reason, "detail": str(detail)[:DETAIL_CHARS]}


def quarantine_table(records: Iterable[Mapping], context: tuple[str, ...] = ()) -> pa.Table:
    """The quarantine as a table: the four fields every job writes, then any `context` columns a job adds to say
    where a row came from (the audit's `role` and `unit`), all strings."""
    schema = pa.schema([*QUARANTINE_SCHEMA, *[(c, pa.string()) for c in context]])
    return pa.Table.from_pylist([{f: r.get(f) for f in schema.names} for r in records], schema=schema)


def reason_counts(records: Iterable[Mapping]) -> dict[str, int]:
    """How many quarantine records there are per reason (what a part's summary and a Ledger carry)."""
    return dict(Counter(r["reason"] for r in records))


class Ledger:
    """Counts of one job: rows in, rows out (scored / kept), quarantined rows by reason. Additive, so per-part
    ledgers computed on workers sum to the job's on the driver without moving any row."""

    def __init__(self, rows_in: int = 0, rows_out: int = 0, reasons: Mapping[str, int] | None = None):
        self.rows_in, self.rows_out = int(rows_in), int(rows_out)
        self.reasons = Counter(dict(reasons or {}))

    @property
    def quarantined(self) -> int:
        return sum(self.reasons.values())

    def add(self, other: "Ledger") -> "Ledger":
        self.rows_in += other.rows_in
        self.rows_out += other.rows_out
        self.reasons.update(other.reasons)
        return self

    def to_dict(self) -> dict:
        return {"in": self.rows_in, "out": self.rows_out, "quarantined": self.quarantined,
                "reasons": dict(sorted(self.reasons.items()))}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Ledger":
        return cls(d.get("in", 0), d.get("out", 0), d.get("reasons", {}))

    @classmethod
    def of_parts(cls, summaries: Mapping[int, Mapping], *, rows_in: str, rows_out: str, what: str) -> "Ledger":
        """The sum of per-part summaries (their `rows_in` and `rows_out` counts and `reasons`), each part checked
        first, so that a part that does not reconcile is named."""
        total = cls()
        for i in sorted(summaries):
            s = summaries[i]
            part = cls(s[rows_in], s[rows_out], s["reasons"])
            part.check(f"{what} {i}")
            total.add(part)
        return total

    def check(self, where: str = "job") -> None:
        if self.rows_in != self.rows_out + self.quarantined:
            raise ReconcileError(f"{where}: row accounting does not reconcile: {self.rows_in} in, "
                                  f"{self.rows_out} out, {self.quarantined} quarantined")


def first_occurrences(ids) -> "np.ndarray":
    """A boolean mask over an Arrow array of ids: True where an id occurs for the first time (the row kept when
    ids repeat). Arrow and numpy only: no Python object per row."""
    import numpy as np
    import pyarrow.compute as pc

    code = np.asarray(pc.index_in(ids, value_set=pc.unique(ids)).to_numpy(), dtype=np.int64)
    pos = np.arange(code.size, dtype=np.int64)
    first = np.full(int(code.max()) + 1 if code.size else 0, code.size, dtype=np.int64)
    np.minimum.at(first, code, pos)
    return first[code] == pos
