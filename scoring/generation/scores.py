"""From a generations table to score columns: what `evaluate` runs on each part and `rescore --generations` runs
on the whole table, line for line the same, which is why rescoring reproduces a run exactly.

Per row and detector: the detector's function of the row's generations of the kinds it reads. Where a kind has
no generation for the row (not asked: a passage without exactly one name; or its request failed) or the
function has nothing to score (DE-COP with no parsable answer), the score is NaN and the reason is counted. A row
that no detector scores is quarantined with its reasons (stage `generate`); a row that some detector scores is
kept, its NaN cells counted in `not_scored` per column and reason.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Mapping, Sequence

import pyarrow as pa

NO_ANSWER = "no_parsable_answer"


def _reason_code(reason: str) -> str:
    return reason.split(":", 1)[0].strip() or "unknown"


def group_generations(gens: pa.Table) -> tuple[dict, dict]:
    """({row id: {kind: [generation rows with a sample]}}, {(row id, kind): error})."""
    by_row: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    errors: dict[tuple[str, str], str] = {}
    for g in gens.to_pylist():
        if g["sample"] is not None and g["sample"] >= 0:
            by_row[g["id"]][g["kind"]].append(g)
        else:
            errors.setdefault((g["id"], g["kind"]), g["error"] or "no generation")
    for kinds in by_row.values():
        for rows in kinds.values():
            rows.sort(key=lambda r: r["sample"])
    return by_row, errors


def compute_generation_scores(gens: pa.Table, rows: Sequence[Mapping], methods: Sequence
                              ) -> tuple[pa.Table, list[dict], dict[str, dict[str, int]]]:
    """(scores of the rows some detector scores: id, label, bucket, in_eval and one float column per method;
    quarantine records of the others; {column: {reason: rows}} for the NaN cells of kept rows)."""
    by_row, errors = group_generations(gens)
    cols: dict[str, list] = {"id": [], "label": [], "bucket": [], "in_eval": [], **{m.column: [] for m in methods}}
    quarantined, not_scored = [], defaultdict(Counter)
    for r in rows:
        rid = str(r["id"])
        values, why = {}, {}
        for m in methods:
            kinds = m.needs
            missing = [k for k in kinds if not by_row.get(rid, {}).get(k)]
            if missing:
                values[m.column] = math.nan
                why[m.column] = errors.get((rid, missing[0]), f"no generation of {missing[0]}")
                continue
            v = float(m.detector.fn(r, by_row[rid], **m.params))
            values[m.column] = v
            if not math.isfinite(v):
                why[m.column] = f"{NO_ANSWER}: {m.column} found nothing to score in the answers"
        if all(not math.isfinite(v) for v in values.values()):
            detail = "; ".join(dict.fromkeys(why.values()))
            quarantined.append({"id": rid, "stage": "generate", "reason": _reason_code(next(iter(why.values()))),
                                "detail": detail[:500]})
            continue
        for column, reason in why.items():
            not_scored[column][_reason_code(reason)] += 1
        cols["id"].append(rid)
        cols["label"].append(int(r["label"]))
        cols["bucket"].append(None if r.get("bucket") is None else str(r["bucket"]))
        cols["in_eval"].append(bool(r.get("in_eval", True)))
        for m in methods:
            cols[m.column].append(values[m.column])
    table = pa.table({"id": pa.array(cols["id"], pa.string()), "label": pa.array(cols["label"], pa.int64()),
                      "bucket": pa.array(cols["bucket"], pa.string()), "in_eval": pa.array(cols["in_eval"], pa.bool_()),
                      **{m.column: pa.array(cols[m.column], pa.float64()) for m in methods}})
    return table, quarantined, {c: dict(v) for c, v in not_scored.items()}


def kinds_of(methods: Sequence) -> list[str]:
    """The prompt kinds the methods read, each once, in a stable order."""
    return sorted({k for m in methods for k in m.needs})
