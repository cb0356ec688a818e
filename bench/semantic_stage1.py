"""The cheap first stage measured on the study's corpus (bench/semantic_study.py): scoring/semantic/prefilter.py keeps
the windows that hold at least `bar` of some query's anchor weight (or any anchor of a query that abstains), only
those are searched, and the decision is re-taken and re-calibrated on them, the null's items included.

Reported: the share of windows kept (what embedding would cost with it on), the prefilter's own time per window,
and recall / false flags / the held-out null rate against the same rule on every window. The windows' vectors come
from the study (all were embedded there), so the kept windows' vectors are the same ones the full run used.
"""
from __future__ import annotations

import time

import numpy as np


def measure_prefilter(cfg, queries, role, half, wins, keys, qv, positives, candidate_scores, calibrate, proportion,
                      bars=(0.5,)) -> dict:
    """For each bar: kept windows, prefilter seconds per 1,000 windows, and the verifier's numbers on the kept
    windows (the study's functions passed in, so the files do not import each other)."""
    from bench.semantic_measure import window_subset
    from scoring.semantic.anchors import anchors
    from scoring.semantic.prefilter import Prefilter
    from scoring.semantic.search import top_k

    items = [anchors(q["input"], answer=q["target"]) for q in queries]
    out = {}
    for bar in bars:
        t = time.perf_counter()
        pf = Prefilter(items, bar)
        mask = pf.mask(wins["texts"])
        secs = time.perf_counter() - t
        keep = np.flatnonzero(mask)
        sub = window_subset(wins, keep)
        top_cos, top_ids = top_k(qv, keys[keep], cfg["k"])
        dec, _, _ = candidate_scores(queries, sub, top_ids, top_cos)
        s = dec.max(1)
        cal = calibrate(s[role == "null"], half[role == "null"], cfg["target_rate"])
        flags = s >= cal["threshold"]
        stats = pf.stats(mask)
        out[f"bar_{bar:g}"] = {
            "bar": bar, "windows": stats.windows, "kept": stats.kept, "kept_share": round(stats.kept_share, 4),
            "uncovered_items": stats.uncovered_items, "abstaining_items": len(pf.abstaining),
            "prefilter_seconds": round(secs, 2), "ms_per_1000_windows": round(1000 * secs / max(1, stats.windows)
                                                                               * 1000, 1),
            "calibration": cal,
            "recall": {r: proportion(flags[role == r].sum(), (role == r).sum()) for r in positives},
            "false_flags_negatives": proportion(flags[role == "negative"].sum(), (role == "negative").sum())}
    return out
