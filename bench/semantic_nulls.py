"""The study's null corpora and its export for the judge study (bench/semantic_study.py calls these):

- `clean_corpus`: two corpora that hold none of the benchmark, the benchmark's flagged share on each against the
  rate the calibration states (the issue's null study);
- `write_decided_pairs`: each query's decided pair, for bench/semantic_judge_study.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

WORK = Path(__file__).resolve().parent / "results" / "_work"


def write_decided_pairs(queries, role, wins, top_ids, top_cos, dec, name: str = "semantic_decided_pairs") -> Path:
    """Each query's decided pair (its best candidate by decision score) to bench/results/_work: what an LLM judge
    would be asked about (bench/semantic_judge_study.py reads it)."""
    import json

    best = dec.argmax(1)
    path = WORK / f"{name}.jsonl"
    WORK.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for q, j in enumerate(best):
            w = int(top_ids[q, j])
            f.write(json.dumps({"id": queries[q]["id"], "role": str(role[q]), "input": queries[q]["input"],
                                "target": queries[q]["target"], "passage": wins["texts"][w] if w >= 0 else None,
                                "cosine": float(top_cos[q, j]), "decision_score": float(dec[q, j])}) + "\n")
    return path


def planted_window(wins: dict, docs: list[dict]) -> np.ndarray:
    """Whether each window overlaps any planted text (a positive or a hard negative)."""
    out = np.zeros(len(wins["texts"]), dtype=bool)
    for i, (d, s, n) in enumerate(zip(wins["doc"], wins["start"], wins["n"])):
        out[i] = any(p["start"] < s + n and s < p["start"] + p["n_words"] for p in docs[d]["plants"])
    return out


def clean_corpus(cfg, queries, role, half, wins, docs, keys, qv) -> dict:
    """Two corpora that hold none of the benchmark (the null study): `siblings`, every document without a positive
    (the hard negatives stay: items of the same style), and `plain`, only the windows that overlap no planted text
    at all (State of the Union prose). For each: the benchmark's flagged share there (truth: none of it is in that
    corpus) at the threshold set on null half A and at the default threshold (set on the whole null, as
    calibrate.DEFAULT_THRESHOLD was), against the rates those calibrations state."""
    from bench.semantic_measure import calibrate, candidate_scores, proportion, window_subset
    from scoring.semantic.calibrate import null_rate, threshold_from_null
    from scoring.semantic.search import top_k

    pos_docs = {i for i, d in enumerate(docs) if any(p["role"] != "hard" for p in d["plants"])}
    subsets = {"siblings": np.flatnonzero(~np.isin(wins["doc"], list(pos_docs))),
               "plain": np.flatnonzero(~planted_window(wins, docs))}
    bench = role != "null"
    out = {}
    for name, keep in subsets.items():
        sub = window_subset(wins, keep)
        top_cos, top_ids = top_k(qv, keys[keep], cfg["k"])
        dec, _, _ = candidate_scores(queries, sub, top_ids, top_cos)
        o = {"documents": len({int(d) for d in sub["doc"]}), "windows": int(keep.size)}
        for method, s in (("cosine", top_cos[:, 0].astype(float)), ("verifier", dec.max(1))):
            cal = calibrate(s[role == "null"], half[role == "null"], cfg["target_rate"])
            whole = threshold_from_null(s[role == "null"], cfg["target_rate"])
            o[method] = {"calibration": cal,
                         "benchmark_flagged": proportion((s[bench] >= cal["threshold"]).sum(), bench.sum()),
                         "whole_null": {"threshold": whole.threshold, "rate": whole.expected_false_flag_rate,
                                        "upper_bound_95": round(whole.upper_bound, 4), "n": whole.n_null},
                         "benchmark_flagged_whole_null": proportion((s[bench] >= whole.threshold).sum(),
                                                                    bench.sum())}
            if method == "verifier":
                from scoring.semantic.calibrate import DEFAULT_THRESHOLD

                d = null_rate(s[role == "null"], DEFAULT_THRESHOLD)
                o[method]["default"] = {"threshold": DEFAULT_THRESHOLD, "null": proportion(d.n_flagged, d.n_null),
                                        "benchmark_flagged": proportion((s[bench] >= DEFAULT_THRESHOLD).sum(),
                                                                        bench.sum())}
        out[name] = o
    return out
