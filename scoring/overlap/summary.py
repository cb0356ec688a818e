"""From per-row overlap results to the numbers an eval team reports: the contaminated share with a 95% interval,
overall and per bucket, label and split, and the distribution of shares."""
from __future__ import annotations

from collections import defaultdict
from typing import Mapping, Sequence

import numpy as np

from scoring.stats.proportions import wilson_ci

SHARE_BINS = (0.0, 1e-12, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0 + 1e-12)  # [0], (0, .1), ..., [.9, 1]
TOP_ROWS = 20


def proportion(k: int, n: int) -> dict:
    """k of n with its Wilson 95% interval (None when n is 0)."""
    lo, hi = wilson_ci(k, n) if n else (None, None)
    return {"contaminated": int(k), "checked": int(n), "share": k / n if n else None, "ci95": [lo, hi]}


def groups(results: Sequence[Mapping], rows: Sequence[Mapping], key: str) -> dict:
    """The contaminated share per value of `key` (bucket, label, split) among checked rows; {} when no row has it."""
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for res, row in zip(results, rows):
        value = row.get(key)
        if value is None or res["share"] is None:
            continue
        by[str(value)][0] += int(res["contaminated"])
        by[str(value)][1] += 1
    return {v: proportion(k, n) for v, (k, n) in sorted(by.items())}


def summarise(results: Sequence[Mapping], rows: Sequence[Mapping]) -> dict:
    """The overlap numbers of report.json: overall and per group, the share histogram and the top rows."""
    checked = [r for r in results if r["share"] is not None]
    k = sum(r["contaminated"] for r in checked)
    shares = np.asarray([r["share"] for r in checked], dtype=np.float64)
    counts, _ = np.histogram(shares, bins=SHARE_BINS)
    top = sorted((r for r in checked if r["n_matched"]),
                 key=lambda r: (-r["share"], -r["longest_match_words"], r["id"]))[:TOP_ROWS]
    return {
        "overall": proportion(k, len(checked)),
        "rows_too_short": len(results) - len(checked),
        "mean_share": float(shares.mean()) if shares.size else None,
        "by": {key: g for key in ("bucket", "label", "split") if (g := groups(results, rows, key))},
        "histogram": {"bins": ["0", "(0, 0.1)"] + [f"[{a:.1f}, {b:.1f})" for a, b in
                                                   zip(SHARE_BINS[2:-2], SHARE_BINS[3:-1])] + ["[0.9, 1]"],
                      "rows": counts.tolist()},
        "top": [{k2: r[k2] for k2 in ("id", "share", "n_matched", "n_ngrams", "longest_match_words",
                                      "corpus_occurrences", "sources", "snippet")} for r in top],
    }
