"""The study's measures, shared by bench/semantic_study.py and the modules it calls (nulls, where, the first stage):
each query's decision over its candidate windows, a proportion with its Clopper-Pearson interval, and a threshold
set on one half of the null and measured on the other.
"""
from __future__ import annotations

import numpy as np


def candidate_scores(queries: list[dict], wins: dict, top_ids: np.ndarray, top_cos: np.ndarray):
    """(decision scores [n_q, k], verifier scores [n_q, k], abstain [n_q]) of each query's candidate windows."""
    from scoring.semantic.anchors import anchors
    from scoring.semantic.calibrate import decision_score
    from scoring.semantic.verify import WindowTerms, verify

    terms: dict[int, WindowTerms] = {}
    ver = np.zeros(top_ids.shape)
    abstain = np.zeros(len(queries), dtype=bool)
    for q, it in enumerate(queries):
        a = anchors(it["input"], answer=it["target"])
        for j, w in enumerate(top_ids[q]):
            if w >= 0:
                if w not in terms:
                    terms[w] = WindowTerms.of(wins["texts"][w])
                v = verify(a, terms[w])
                ver[q, j], abstain[q] = v.score, v.abstain
    return decision_score(top_cos, ver, abstain[:, None] & np.ones_like(ver, dtype=bool)), ver, abstain


def proportion(k: int, n: int) -> dict:
    from scoring.stats.proportions import clopper_pearson_ci

    lo, hi = clopper_pearson_ci(int(k), int(n))
    return {"k": int(k), "n": int(n), "rate": round(k / n, 4) if n else None,
            "ci95": [round(lo, 4), round(hi, 4)] if n else None}


def calibrate(null_scores: np.ndarray, half: np.ndarray, target: float) -> dict:
    """Threshold on null half A, its rate there (what a report would state) and on the held-out half B."""
    from scoring.semantic.calibrate import null_rate, threshold_from_null

    cal = threshold_from_null(null_scores[half], target)
    held = null_rate(null_scores[~half], cal.threshold)
    return {"threshold": cal.threshold, "stated": {"n": cal.n_null, "flagged": cal.n_flagged,
                                                   "rate": cal.expected_false_flag_rate,
                                                   "upper_bound_95": round(cal.upper_bound, 4)},
            "held_out": proportion(held.n_flagged, held.n_null) | {"upper_bound_95": round(held.upper_bound, 4)}}


def window_subset(wins: dict, keep: np.ndarray) -> dict:
    """The study's windows (texts, doc, start, n) at the indices `keep`, in order."""
    return {k: ([wins["texts"][i] for i in keep] if k == "texts" else v[keep]) for k, v in wins.items()}
