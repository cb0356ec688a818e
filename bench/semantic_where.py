"""Where the study's positives were found (bench/semantic_study.py calls these): whether a chosen candidate is the
planted window, and per rephraser the retrieval ranks, the planted window's scores, and recall by document length
and by whether one window holds the whole rephrase (the cost of window sizing).
"""
from __future__ import annotations

import numpy as np

LENGTH_BUCKETS = ((100, 199), (200, 299), (300, 400))


def right_window(wins: dict, top_ids: np.ndarray, best: np.ndarray, placed: dict | None) -> bool:
    """Whether the candidate chosen overlaps the planted rephrase in its document."""
    if placed is None:
        return False
    w = int(top_ids[best])
    if w < 0 or wins["doc"][w] != placed["doc"]:
        return False
    s, n = wins["start"][w], wins["n"][w]
    return bool(s < placed["start"] + placed["n_words"] and placed["start"] < s + n)


def where_found(queries, role, docs, placed, wins, plan, top_ids, top_cos, ver, methods) -> dict:
    """Per rephraser: retrieval (a window overlapping the plant among the top 1/10/k), the planted window's cosine
    and verifier score beside the null's best, and each method's recall by document length and by whether one
    window holds the whole rephrase."""
    from bench.semantic_report import quantiles
    from bench.semantic_measure import proportion

    out = {"null_best_cosine": quantiles(top_cos[role == "null", 0])}
    for r in sorted({p["role"] for p in placed.values()}):
        idx = np.flatnonzero(role == r)
        rank, cos_at, ver_at, bucket, whole = [], [], [], [], []
        for i in idx:
            p = placed[queries[i]["id"]]
            hits = [j for j, w in enumerate(top_ids[i]) if w >= 0 and right_window(wins, top_ids[i], j, p)]
            rank.append(hits[0] if hits else None)
            cos_at.append(top_cos[i, hits[0]] if hits else np.nan)
            ver_at.append(ver[i, hits[0]] if hits else np.nan)
            base = docs[p["doc"]]["base_words"]
            bucket.append(next(f"{lo}-{hi}" for lo, hi in LENGTH_BUCKETS if lo <= base <= hi))
            starts = wins["start"][wins["doc"] == p["doc"]]
            ns = wins["n"][wins["doc"] == p["doc"]]
            whole.append(bool(((starts <= p["start"]) & (starts + ns >= p["start"] + p["n_words"])).any()))
        k = top_ids.shape[1]
        d = {"retrieved_top1": proportion(sum(x == 0 for x in rank), len(idx)),
             "retrieved_top10": proportion(sum(x is not None and x < 10 for x in rank), len(idx)),
             f"retrieved_top{k}": proportion(sum(x is not None for x in rank), len(idx)),
             "planted_window_cosine": quantiles(np.array(cos_at)),
             "planted_window_verifier": quantiles(np.array(ver_at)),
             "rephrase_words": quantiles(np.array([placed[queries[i]["id"]]["n_words"] for i in idx], dtype=float)),
             "whole_in_a_window": proportion(sum(whole), len(idx)), "by_document_words": {}, "by_whole_in_window": {}}
        for name, m in methods.items():
            f = m["flags"][idx]
            d["by_document_words"][name] = {b: proportion(f[[x == b for x in bucket]].sum(), bucket.count(b))
                                            for b in dict.fromkeys(sorted(bucket))}
            d["by_whole_in_window"][name] = {str(v): proportion(f[[x == v for x in whole]].sum(), whole.count(v))
                                             for v in (True, False) if whole.count(v)}
        out[r] = d
    return out


def recall_by_names_kept(queries, role, flags, rephrasers: dict) -> dict:
    """Per rephraser, the verifier's recall on the rephrases that kept every name of the original and on those that
    dropped one (a school's or a team's name is what a small model drops): the anchors a flag needs are the item's."""
    from bench.semantic_rephrase import lost_names
    from bench.semantic_measure import proportion

    out = {}
    for r, (_, reps) in rephrasers.items():
        idx = [i for i in np.flatnonzero(role == r)]
        kept = [not lost_names(queries[i]["input"], reps[queries[i]["id"]]["rephrase"]) for i in idx]
        out[r] = {label: proportion(sum(bool(flags[i]) for i, k in zip(idx, kept) if k == want),
                                    sum(k == want for k in kept))
                  for label, want in (("kept_every_name", True), ("dropped_a_name", False))}
    return out

