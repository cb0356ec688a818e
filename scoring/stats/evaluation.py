"""From a token-stats table to a score table and metrics. No model, no Ray: `evaluate` and `rescore` share every
line of it, which is why rescoring reproduces evaluation exactly. The plots and report.md are
scoring/reports/evaluation_report.py; jobs/kit/evaluation_files.py writes them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from scoring.detectors import Method
from scoring.detectors.base import distribution_gate
from scoring.detectors.dc_pdd import TOKEN_FREQ
from scoring.stats.metrics import apply_threshold, calibrate_threshold, summarize_many
from scoring.lm.tokenstats import views_by_name
from scoring.lm.views import ORIGINAL

ALL = "all"


def compute_scores(token_stats: pa.Table, rows: Sequence[Mapping], methods: Sequence[Method],
                   resources: Mapping[str, object] | None = None) -> pa.Table:
    """One row per evaluated example (`rows`: id, label, bucket, in_eval), one float column per method."""
    ids = [str(r["id"]) for r in rows]
    distribution_gate(methods, token_sources(token_stats))
    views: dict[str, object] = dict(views_by_name(token_stats, ids))
    views.update(resources or {})
    if ORIGINAL not in views:
        raise ValueError("token stats have no 'original' view")
    cols: dict[str, object] = {
        "id": ids,
        "label": [int(r["label"]) for r in rows],
        "bucket": [None if r.get("bucket") is None else str(r["bucket"]) for r in rows],
        "in_eval": [bool(r.get("in_eval", True)) for r in rows],
    }
    for m in methods:
        missing = [v for v in m.needs if v not in views]
        if missing:
            raise ValueError(f"{m.column} needs {missing}, which this token-stats table does not hold")
        cols[m.column] = m(views[ORIGINAL], views).astype(np.float64)
    return pa.table(cols)


def token_sources(token_stats: pa.Table) -> dict[str, set]:
    """Each view's `lp_source` values (older tables, without the column, come from the weights)."""
    if "lp_source" not in token_stats.column_names:
        return {}
    sources: dict[str, set] = {}
    for r in token_stats.select(["view", "lp_source"]).group_by(["view", "lp_source"]).aggregate([]).to_pylist():
        sources.setdefault(r["view"], set()).add(r["lp_source"])
    return sources


def bucket_groups(scores: pa.Table) -> list[tuple[str, np.ndarray]]:
    in_eval = np.asarray(scores.column("in_eval").to_numpy(zero_copy_only=False), dtype=bool)
    buckets = scores.column("bucket")
    out = [(ALL, in_eval)]
    # Arrow masks, not a Python string per row: the driver reads score columns of millions of rows.
    for b in sorted((b for b in pc.unique(buckets).to_pylist() if b), key=lambda x: (len(x), x)):
        out.append((b, in_eval & np.asarray(pc.fill_null(pc.equal(buckets, b), False).to_numpy(), dtype=bool)))
    return out


def calibration_split(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A seeded, label-stratified boolean mask of the calibration part."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(labels.size, dtype=bool)
    for cls in (0, 1):
        idx = np.flatnonzero(labels == cls)
        rng.shuffle(idx)
        mask[idx[: int(round(fraction * idx.size))]] = True
    return mask


def compute_metrics(scores: pa.Table, methods: Sequence[Method], *, seed: int = 0, n_bootstrap: int = 1000,
                    calibrate: str = "accuracy", calib_fraction: float = 0.3,
                    counts: Mapping[str, int] | None = None) -> list[dict]:
    """metrics.json: one record per method × bucket (and "all"). Each record also carries a threshold calibrated
    on a stratified calibration part of that bucket and its accuracy/F1/TPR/FPR on the rest."""
    labels_all = scores.column("label").to_numpy().astype(np.int64)
    s_all = [scores.column(m.column).to_numpy().astype(np.float64) for m in methods]
    groups = list(bucket_groups(scores))
    # one shared bootstrap per bucket for every method (scoring/stats/metrics.summarize_many); a bucket that holds
    # every evaluated row (a benchmark of one length) has the same inputs and seed as "all", so the same result
    summaries, seen = [], {}
    for _, mask in groups:
        key = mask.tobytes()
        if key not in seen:
            seen[key] = summarize_many(labels_all[mask], [s[mask] for s in s_all], n_bootstrap=n_bootstrap, seed=seed)
        summaries.append(seen[key])
    records = []
    for k, m in enumerate(methods):
        for g, (bucket, mask) in enumerate(groups):
            y, s = labels_all[mask], s_all[k][mask]
            rec = {"method": m.name, "params": dict(m.params), "column": m.column, "bucket": bucket,
                   **summaries[g][k]}
            finite = np.isfinite(s)
            rec["n_nan"] = int((~finite).sum())
            y, s = y[finite], s[finite]
            calib = calibration_split(y, calib_fraction, seed)
            if calibrate and 0 < y[calib].sum() < calib.sum() and (~calib).sum():
                th = calibrate_threshold(y[calib], s[calib], objective=calibrate)
                rec["calibrated"] = {"calib_n": int(calib.sum()), **apply_threshold(th, y[~calib], s[~calib])}
            if counts:
                rec.update({f"rows_{k}": int(v) for k, v in counts.items()})
            records.append(rec)
    return records


def token_freq_table(counts: np.ndarray) -> pa.Table:
    """DC-PDD's token counts as a table of the non-zero (token_id, count) pairs, the vocabulary size in its metadata."""
    nz = np.flatnonzero(counts)
    table = pa.table({"token_id": nz.astype(np.int64), "count": counts[nz].astype(np.int64)})
    return table.replace_schema_metadata({"vocab_size": str(counts.size)})


def load_token_freq(path: Path) -> dict[str, np.ndarray]:
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    size = int((t.schema.metadata or {}).get(b"vocab_size", b"0")) or int(max(t.column("token_id").to_pylist()) + 1)
    counts = np.zeros(size, dtype=np.int64)
    counts[np.asarray(t.column("token_id").to_pylist(), dtype=np.int64)] = t.column("count").to_pylist()
    return {TOKEN_FREQ: counts}
