"""Evidence joined to results for `tidemark impact`: per task, every evidence source matched to the task's items
by id or, where the ids differ, by text; then each item's split.

An item's id is the doc's own `id` (lm-evaluation-harness) or the row's `id` (plain results); an evidence item's
is the id its job gave the benchmark row. Where they are the same dataset under the same ids, the id join finds
them; where the harness numbers its documents 0.. and the evidence job used the dataset's own ids (or the other way
round), the text join does: both sides' texts are reduced to their lowercased `\\w+` words and hashed
(scoring/overlap/ngrams.text_key). `--join auto` takes, per task and source, whichever matches more items.

An item that no evidence source matched cannot be called clean: it is `unmatched`, counted and listed in
items.parquet and the report, and left out of every split and score. An item matched by some source but not by
another of the same role counts that role as not leaked (no evidence that it leaked). A source's role is
`input`, `answer` (verbatim overlap, or a detector) or `rephrased` (overlap --semantic's decision): each role's
flags are OR-ed over its sources and scoring/impact/splits.label_splits names the split from the three.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

JOINS = ("auto", "id", "text")


def match_source(items: pa.Table, evidence: pa.Table, how: str = "auto") -> tuple[dict, dict]:
    """(item id → (value, flag) of the evidence source, facts: method, matched, unmatched) for one task's items."""
    from jobs.parts.impact.evidence import keep_first, valid_keys

    if how not in JOINS:
        raise ValueError(f"--join must be one of {JOINS}, got {how!r}")
    ev = keep_first(evidence)
    ids = items.column("item").to_pylist()
    keys = items.column("input_key").to_pylist()
    by_id = {i: (v, f) for i, v, f in zip(*(ev.column(c).to_pylist() for c in ("item", "value", "flag")))}
    keyed = valid_keys(ev)
    by_key = {}
    for k, v, f in zip(*(keyed.column(c).to_pylist() for c in ("input_key", "value", "flag"))):
        by_key.setdefault(k, (v, f))
    via_id = {i: by_id[i] for i in ids if i in by_id}
    via_text = {i: by_key[k] for i, k in zip(ids, keys) if k is not None and k in by_key}
    method = how if how != "auto" else ("id" if len(via_id) >= len(via_text) else "text")
    found = via_id if method == "id" else via_text
    return found, {"join": method, "matched": len(found), "unmatched": len(ids) - len(found),
                   "matched_by_id": len(via_id), "matched_by_text": len(via_text)}


def task_items(results: pa.Table, task: str) -> pa.Table:
    """The task's distinct items (item, input_key), in a stable order."""
    import pyarrow.compute as pc

    t = results.filter(pc.equal(results.column("task"), task)).select(["item", "input_key"])
    from curation.io.ledger import first_occurrences

    t = t.filter(pa.array(first_occurrences(t.column("item")))) if t.num_rows else t
    return t.take(pc.sort_indices(t, [("item", "ascending")]))


def label_items(items: pa.Table, sources: list[dict], how: str = "auto") -> tuple[pa.Table, list[dict]]:
    """One task's items with every source's value and flag and the item's split; and each source's join facts."""
    from scoring.impact.splits import label_splits

    n = items.num_rows
    cols = {"item": items.column("item")}
    facts = []
    matched_any = np.zeros(n, dtype=bool)
    leaked = {role: np.zeros(n, dtype=bool) for role in ("input", "answer", "rephrased")}
    has_role = {role: False for role in leaked}
    ids = items.column("item").to_pylist()
    for src in sources:
        found, f = match_source(items, src["table"], how)
        facts.append({"source": src["name"], "role": src["role"], **f})
        value = np.array([found[i][0] if i in found else np.nan for i in ids], dtype=np.float64)
        flag = np.array([bool(found[i][1]) if i in found else False for i in ids])
        hit = np.array([i in found for i in ids], dtype=bool)
        matched_any |= hit
        leaked[src["role"]] |= flag
        has_role[src["role"]] = True
        cols[src["name"]] = pa.array([v if h else None for v, h in zip(value.tolist(), hit)], pa.float64())
        cols[f"{src['name']}:leaked"] = pa.array([bool(x) if h else None for x, h in zip(flag, hit)], pa.bool_())
    split = label_splits(*(leaked[role] if has_role[role] or role == "input" else None
                           for role in ("input", "answer", "rephrased")))
    split = np.where(matched_any, split, "unmatched")
    cols["split"] = pa.array(split.tolist(), pa.string())
    return pa.table(cols), facts
