"""The canary test (Zhang et al., SaTML 2025; copyright traps, Meeus et al., ICML 2024): do a model's scores rank
the planted canaries of a set above its held-out ones? Pure numpy/scipy over the score column;
jobs/commands/canary.py scores the canaries on the shared pool and calls this.

Per set: the one-sided Mann-Whitney U test (scoring/stats/rank_test.py), planted > held-out, with the detector's
convention that a larger score is more member-like. Several sets (independent canaries, independent coins)
combine by Fisher's method. The p-value is a false-positive rate only for what was fixed before the scores were
seen: the detector, the sets and the one-sided direction. So the test takes one detector, and the report says
which and why.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from scoring.stats.rank_test import combined_p, planted_vs_holdout

MEANING = (
    "Which canaries were published and which were kept private was decided by a seeded coin before publication. If "
    "the model was not trained on the published canaries, every assignment of the scores to the two roles is "
    "equally likely, so a p-value this small or smaller happens by chance with probability at most p, whatever "
    "kind of text the canaries are. A small p-value is evidence that the published canaries (or text that contains "
    "them) were in the model's training data; a large one is not evidence that they were not: a model can see a "
    "canary without memorising it measurably (trap sequences needed ~1,000 repetitions to be detected in a "
    "1.3B-parameter model, Meeus et al. 2024). The guarantee holds for one detector chosen before the test; trying "
    "several and reporting the smallest p-value does not keep it.")


def conclusion(p: float, sets: int = 1) -> str:
    """The test's answer in one sentence, led by "p = …" (report.json's `conclusion`)."""
    what = "the planted canaries" if sets == 1 else f"the planted canaries of {sets} sets (Fisher's combination)"
    if p < 0.01:
        return (f"p = {p:.2g}: the model ranks {what} above the held-out ones; such a ranking happens by chance "
                "less than 1% of the time in a model that never saw them (significant at 1%)")
    if p < 0.05:
        return (f"p = {p:.2g}: weak evidence that the model was trained on {what} (significant at 5%, not at 1%)")
    return (f"p = {p:.2g}: no evidence that the model was trained on {what} (which is not evidence that it was "
            "not: it may have seen them too rarely to memorise them)")


def canary_test(sets: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> dict:
    """{"sets": {name: test result + means}, "combined": Fisher's combination or None, "p_value", "conclusion"}
    for {name: (planted scores, held-out scores)}. A non-finite score is refused: a canary that could not be
    scored must be reported, not silently dropped from one role."""
    if not sets:
        raise ValueError("no canary set to test")
    results = {}
    for name, (planted, holdout) in sets.items():
        a, b = np.asarray(planted, dtype=np.float64), np.asarray(holdout, dtype=np.float64)
        if not np.isfinite(a).all() or not np.isfinite(b).all():
            raise ValueError(f"set {name!r}: a canary's score is not finite")
        res = planted_vs_holdout(a, b)
        res.update({"mean_plant": float(a.mean()), "mean_holdout": float(b.mean()),
                    "median_plant": float(np.median(a)), "median_holdout": float(np.median(b))})
        res["conclusion"] = conclusion(res["p_value"])
        results[name] = res
    combined = combined_p([r["p_value"] for r in results.values()]) if len(results) > 1 else None
    p = combined["p_value"] if combined else next(iter(results.values()))["p_value"]
    return {"sets": results, "combined": combined, "p_value": p, "conclusion": conclusion(p, len(results))}
