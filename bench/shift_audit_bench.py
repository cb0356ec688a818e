"""The blind-baseline shift audit on a 10k-row benchmark (issue 4's runtime target: under a minute on 2 cores),
wired into `make bench` by bench/run.py.

The benchmark is real text with a real time shift, built like a WikiMIA release: State of the Union passages in
four length buckets (32/64/128/256 words), members from addresses before `member_before_year`, non-members from
the later ones, balanced per bucket. The audit is the one `build-benchmark` and `tidemark shift-audit` run (all
three blind classifiers, 5 grouped folds, 1000 bootstrap resamples); only its wall time is the benchmark, and the
AUC is recorded so a result that got faster by auditing less is recognisable.
"""
from __future__ import annotations

import time
from typing import Any, Callable

BUCKETS = (32, 64, 128, 256)


def shifted_rows(n_rows: int, *, member_before_year: int = 1950, seed: int = 0) -> list[dict]:
    """`n_rows` rows split evenly over BUCKETS and labels: member = an address before `member_before_year`."""
    from scoring.studies.known_membership import sotu_passages

    per_cell = n_rows // (2 * len(BUCKETS))
    rows = []
    for bucket in BUCKETS:
        pool = sotu_passages(bucket, seed=seed)
        for label in (1, 0):
            side = [p for p in pool if (int(p["date"][:4]) < member_before_year) == bool(label)][:per_cell]
            if len(side) < per_cell:
                raise ValueError(f"only {len(side)} {bucket}-word passages with label {label}; need {per_cell}")
            rows += [{"id": f"{p['id']}@{bucket}", "input": p["text"], "label": label, "bucket": str(bucket)}
                     for p in side]
    return rows


def bench_shift_audit(n_rows: int = 10_000, *, n_bootstrap: int = 1000, seed: int = 0,
                      log: Callable[[str], None] = print) -> dict[str, Any]:
    from curation.shift.audit import audit_rows

    rows = shifted_rows(n_rows, seed=seed)
    log(f"  shift audit: {len(rows)} rows, buckets {list(BUCKETS)} ...")
    started = time.perf_counter()
    res = audit_rows([r["input"] for r in rows], [r["label"] for r in rows], [r["bucket"] for r in rows],
                     seed=seed, n_bootstrap=n_bootstrap, progress=False)
    seconds = time.perf_counter() - started
    log(f"  shift audit: {seconds:.1f} s, blind AUC {res['overall']['auc']:.3f}")
    return {
        "rows": len(rows),
        "buckets": list(BUCKETS),
        "benchmark": "SOTU passages; members: addresses before 1950, non-members: 1950 and later",
        "classifiers": res["overall"].get("classifiers"),
        "n_folds": 5,
        "n_bootstrap": n_bootstrap,
        "seconds": round(seconds, 2),
        "rows_per_s": round(len(rows) / seconds, 1),
        "target_seconds": 60,
        "blind_auc_overall": res["overall"]["auc"],
        "blind_auc_per_bucket": {b: v["auc"] for b, v in res.get("buckets", {}).items()},
    }
