"""What a text-only evaluation adds to evaluate's report (run.json, report.md, report.html): the set test, and the
top-scored rows' sampled continuations beside the true one, read back from the generations parts for a few ids."""
from __future__ import annotations

import json
from pathlib import Path

EXAMPLES = 5  # rows shown
EXAMPLE_SAMPLES = 3  # sampled continuations shown per row (the most covered first)
CONTINUATION_DETECTORS = ("ngram_coverage", "creativity_index", "samia")


def set_test(scores, spec: str | None, methods) -> dict | None:
    """--set-test's result (scoring/stats/set_test.py), or None where none was asked."""
    if not spec:
        return None
    from scoring.stats.set_test import resolve_column, suspect_vs_reference

    return suspect_vs_reference(scores, resolve_column(spec, methods))


def examples(dest, scores, methods) -> list[dict]:
    """The top-scored rows of the first continuation detector: prompt, true continuation, and the samples with
    their covered character spans (scoring/generation/text.covered_spans)."""
    import numpy as np

    from jobs.plane.part_store import read_rows
    from scoring.generation.text import coverage, covered_spans

    chosen = next((m for name in CONTINUATION_DETECTORS for m in methods if m.name == name), None)
    if chosen is None:
        return []
    s = np.asarray(scores.column(chosen.column).to_numpy(zero_copy_only=False), dtype=np.float64)
    ranked = np.argsort(-np.where(np.isfinite(s), s, -np.inf), kind="stable")
    order = [i for i in ranked if np.isfinite(s[i])][:EXAMPLES]
    ids = [scores.column("id")[int(i)].as_py() for i in order]
    labels = {scores.column("id")[int(i)].as_py(): scores.column("label")[int(i)].as_py() for i in order}
    gens = read_rows(dest, "generations.parquet", ids, ["id", "kind", "sample", "prompt", "text", "target", "info"])
    n = int(chosen.params.get("n", 3))
    kind = chosen.needs[0]
    out = []
    for rid, value in zip(ids, (s[int(i)] for i in order)):
        rows = [g for g in (gens.to_pylist() if gens is not None else []) if g["id"] == rid and g["kind"] == kind
                and g["sample"] >= 0]
        if not rows:
            continue
        ranked = sorted(rows, key=lambda g: -coverage(g["text"], g["target"], n))[:EXAMPLE_SAMPLES]
        out.append({"id": rid, "label": labels[rid], "column": chosen.column, "score": float(value),
                    "prompt": rows[0]["prompt"], "target": rows[0]["target"], "n": n,
                    "samples": [{"sample": g["sample"], "text": g["text"],
                                 "coverage": coverage(g["text"], g["target"], n),
                                 "spans": covered_spans(g["text"], g["target"], n)} for g in ranked]})
    return out


def write_blind(out: Path, blind_res: dict | None) -> None:
    if blind_res:
        (out / "blind_baseline.json").write_text(json.dumps(blind_res["result"], indent=2, default=float))
