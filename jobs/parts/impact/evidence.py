"""Tidemark's own per-item evidence for `tidemark impact`: an OUT of `overlap`, `evaluate` (log-probability or
text-only detectors) or `audit`, recognised by its `_SUCCESS` record, turned into one table: per item, whether it
leaked, and the value that says so.

- overlap, verbatim: `rows.parquet`'s share of the item's n-grams found in the corpus; leaked where share > the
  threshold (`--input-threshold` / `--answer-threshold`, 0 by default: any 13-gram, the GPT-3 and lm-evaluation-harness
  rule).
  A row shorter than n words has no n-gram and no share: it is no evidence (the item is not called clean for it).
  Its role is the field it scanned: `answer`, `target`, `solution` or `output` make it answer evidence, anything
  else input evidence (`--evidence answer=OUT` says so explicitly).
- overlap, rephrased (a run with --semantic): `semantic.parquet`'s `rephrased` per item, its decision score the
  value; role `rephrased` (scoring/impact/splits.py: not clean, and `rephrased_leaked` where no verbatim evidence
  names the item). An OUT with both files is two sources; one with only semantic.parquet (--n 0) is one. The
  facts carry the run's embedder, threshold and the false-flag rate it was set at (report.json's `semantic`).
- evaluate: a detector's score per item (`--detector`, else the run's first column), flagged where it passes the
  threshold at which at most `--detector-fpr` (5%) of the run's label-0 rows, items the model cannot have seen,
  are flagged. The items are the run's label-1 rows.
- audit (benchmark mode): the same, with the threshold set on the calibration non-members; an item's score is its
  highest snippet's.
Every table carries each item's text key (scoring/overlap/ngrams.text_key, from the benchmark the evidence job
read), so items are joined by id or, where the ids differ, by text.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curation.io.outputs import Location

EVIDENCE_SCHEMA = pa.schema([("item", pa.string()), ("input_key", pa.uint64()), ("value", pa.float64()),
                             ("flag", pa.bool_())])
ROLES = ("input", "answer")
ANSWER_FIELDS = ("answer", "target", "solution", "output")


def parse_spec(spec: str) -> tuple[str | None, str]:
    """`answer=OUT` → ("answer", OUT); a plain OUT → (None, OUT)."""
    role, sep, path = spec.partition("=")
    return (role, path) if sep and role in ROLES else (None, spec)


def read_evidence(spec: str, settings: dict) -> list[dict]:
    """The sources of one evidence OUT, each {name, job, role, path, table (EVIDENCE_SCHEMA), facts}: one, or two
    for an overlap run with --semantic and its n-gram pass."""
    role, path = parse_spec(spec)
    loc = Location(path)
    done = loc.completion()
    if not done:
        raise FileNotFoundError(f"--evidence {path}: no _SUCCESS there (not a finished Tidemark output)")
    job = done.get("job")
    if job == "overlap":
        return _overlap(loc, path, role, settings)
    if job == "evaluate":
        return [_evaluate(loc, path, role or "input", settings)]
    if job == "audit":
        return [_audit(loc, path, role or "input", settings)]
    raise ValueError(f"--evidence {path}: a {job!r} output; impact reads overlap, evaluate and audit outputs")


def _keys(benchmark: str | None, field: str | None, ids: list[str]) -> list:
    """The text key of each id, from the benchmark the evidence job read (None where it cannot be read here)."""
    from jobs.plane.benchmark_reader import text_keys

    key = text_keys(benchmark, field)
    return [key.get(i) for i in ids]


def _overlap(loc: Location, path: str, role: str | None, settings: dict) -> list[dict]:
    """The verbatim source (rows.parquet) and, after a run with --semantic, the rephrased one (semantic.parquet):
    whichever the run wrote. Both name the benchmark's rows by the same ids, so its text keys are read once."""
    from jobs.plane.benchmark_reader import text_keys

    report = loc.read_json("report.json")
    field = (report.get("settings") or {}).get("benchmark_field")
    role = role or ("answer" if field in ANSWER_FIELDS else "input")
    keys = text_keys((report.get("inputs") or {}).get("benchmark"), field)
    sources = [_verbatim(loc, path, role, settings, report, keys)] if loc.exists("rows.parquet") else []
    if report.get("semantic") is not None and loc.exists("semantic.parquet"):
        if role == "answer":  # the semantic pass decides whether the scanned text was rephrased: here, an answer's
            raise ValueError(f"--evidence {path}: an overlap --semantic run over the answers ({field or 'answer'}); "
                             "a rephrased answer is not read as evidence: run --semantic over the questions")
        sources.append(_semantic(loc, path, report["semantic"], keys))
    if not sources:
        raise ValueError(f"--evidence {path}: an overlap output with neither rows.parquet nor semantic.parquet")
    return sources


def _verbatim(loc: Location, path: str, role: str, settings: dict, report: dict, keys: dict) -> dict:
    field = (report.get("settings") or {}).get("benchmark_field")
    threshold = float(settings.get(f"{role}_threshold", 0.0))
    rows = loc.read_parquet("rows.parquet", ["id", "share"])
    share = rows.column("share").to_numpy(zero_copy_only=False).astype(np.float64)
    checked = np.isfinite(share)  # a row shorter than n words has no n-gram: no evidence either way, not "clean"
    rows, share = rows.filter(pa.array(checked)), share[checked]
    ids = rows.column("id").to_pylist()
    table = pa.table({"item": ids, "input_key": pa.array([keys.get(i) for i in ids], pa.uint64()),
                      "value": share, "flag": share > threshold})
    return {"name": f"overlap:{role}", "job": "overlap", "role": role, "path": path, "table": table,
            "facts": {"field": field, "threshold": threshold, "n": report.get("settings", {}).get("n"),
                      "rule": f"share of the {field or 'input'}'s n-grams found in the corpus > {threshold:g}",
                      "no_ngram": int((~checked).sum())}}


def _semantic(loc: Location, path: str, block: dict, keys: dict) -> dict:
    """semantic.parquet as evidence: every scored row is checked (a row the corpus gave no window has decision score
    0 and is not flagged: evidence of absence, as a verbatim share of 0 is)."""
    rows = loc.read_parquet("semantic.parquet", ["id", "decision_score", "rephrased"])
    ids = rows.column("id").to_pylist()
    value = pc.fill_null(rows.column("decision_score"), np.nan).to_numpy(zero_copy_only=False).astype(np.float64)
    flag = pc.fill_null(rows.column("rephrased"), False)
    table = pa.table({"item": ids, "input_key": pa.array([keys.get(i) for i in ids], pa.uint64()), "value": value,
                      "flag": flag})
    threshold, rate = block.get("threshold"), block.get("expected_false_flag_rate")
    embedder = block.get("embedder") or {}
    calibrated = (f"an expected false-flag rate of {rate:.2%} ({block.get('threshold_source') or 'source unknown'})"
                  if rate is not None else "no claimed false-flag rate (not calibrated on a null)")
    judged = "; the LLM judge's verdict where it gave one" if block.get("judge") else ""
    return {"name": "overlap:rephrased", "job": "overlap", "role": "rephrased", "path": path, "table": table,
            "facts": {"semantic": True, "embedder": embedder.get("name"),
                      "embedder_weights_digest": embedder.get("weights_digest"), "threshold": threshold,
                      "expected_false_flag_rate": rate, "false_flag_upper_bound": block.get("false_flag_upper_bound"),
                      "threshold_source": block.get("threshold_source"), "judge": block.get("judge"),
                      "flagged": block.get("flagged"), "n": block.get("n"),
                      "rule": f"rephrased in the corpus: decision score >= {threshold:.3g} (and > 0), nearest "
                              f"windows by {embedder.get('name') or 'the embedder'}, checked by the verifier{judged}; "
                              f"threshold at {calibrated}"}}


def _flags(scores: np.ndarray, reference: np.ndarray, fpr: float) -> tuple[np.ndarray, float]:
    from scoring.impact.splits import flag_at_fpr

    return flag_at_fpr(scores, reference, fpr)


def _evaluate(loc: Location, path: str, role: str, settings: dict) -> dict:
    from jobs.plane.part_store import read_parts

    run = loc.read_json("run.json")
    scores = read_parts(loc, "scores.parquet")
    columns = [c for c in scores.column_names if c not in ("id", "label", "bucket", "in_eval")]
    column = settings.get("detector") or columns[0]
    if column not in columns:
        raise ValueError(f"--detector {column!r} is not a score column of {path} ({columns})")
    label = scores.column("label").to_numpy(zero_copy_only=False)
    s = scores.column(column).to_numpy(zero_copy_only=False).astype(np.float64)
    reference = s[(label == 0) & np.isfinite(s)]
    if not reference.size:
        raise ValueError(f"--evidence {path}: no label-0 row (items the model cannot have seen) to set the "
                         f"threshold of {column} on")
    fpr = float(settings.get("detector_fpr", 0.05))
    items = label == 1
    flags, threshold = _flags(s[items], reference, fpr)
    ids = scores.column("id").filter(pa.array(items)).to_pylist()
    table = pa.table({"item": ids, "input_key": pa.array(_keys(run.get("benchmark"), None, ids), pa.uint64()),
                      "value": s[items], "flag": flags})
    mode = "text-only" if run.get("mode") == "text-only" else "log-probability"
    return {"name": f"{column}:{role}", "job": "evaluate", "role": role, "path": path, "table": table,
            "facts": {"detector": column, "mode": mode, "fpr": fpr, "threshold": float(threshold),
                      "reference_rows": int(reference.size),
                      "rule": f"{column} >= {threshold:.4g}, the threshold flagging at most {fpr:.0%} of the run's "
                              f"{reference.size} label-0 rows"}}


def _audit(loc: Location, path: str, role: str, settings: dict) -> dict:
    from jobs.plane.part_store import read_parts

    report = loc.read_json("report.json")
    snippets = read_parts(loc, "snippets.parquet", ["doc_id", "role", "label", "score"])
    s = snippets.column("score").to_numpy(zero_copy_only=False).astype(np.float64)
    role_col = np.asarray(snippets.column("role").to_pylist())
    label = snippets.column("label").to_numpy(zero_copy_only=False)
    reference = s[(role_col == "calibration") & (label == 0) & np.isfinite(s)]
    target = snippets.filter(pa.array(role_col == "target"))
    best = target.group_by("doc_id").aggregate([("score", "max")])  # an item's highest snippet
    fpr = float(settings.get("detector_fpr", 0.05))
    values = best.column("score_max").to_numpy(zero_copy_only=False).astype(np.float64)
    flags, threshold = _flags(values, reference, fpr)
    ids = best.column("doc_id").to_pylist()
    table = pa.table({"item": ids, "input_key": pa.array(_keys(report.get("target"), None, ids), pa.uint64()),
                      "value": values, "flag": flags})
    detector = report.get("detector")
    return {"name": f"{detector}:{role}", "job": "audit", "role": role, "path": path, "table": table,
            "facts": {"detector": detector, "fpr": fpr, "threshold": float(threshold),
                      "reference_rows": int(reference.size),
                      "rule": f"{detector} >= {threshold:.4g}, flagging at most {fpr:.0%} of the calibration "
                              "non-members"}}


def keep_first(table: pa.Table) -> pa.Table:
    from curation.io.ledger import first_occurrences

    return table.filter(pa.array(first_occurrences(table.column("item")))) if table.num_rows else table


def valid_keys(table: pa.Table) -> pa.Table:
    return table.filter(pc.is_valid(table.column("input_key")))
