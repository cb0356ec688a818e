"""The decision: one score per (item, window) candidate, and the threshold on it, set on a null.

Decision score (`decision_score`), in [0, 1]:
- 0 when the cosine is below COSINE_FLOOR: the embedding did not find the window close at all, and anchors matching
  in an unrelated passage (a table of numbers, a list of names) are chance;
- else, for an item with enough anchors to decide, the verifier's weighted recall (verify.py): the evidence that
  separates a rephrase from a different item of the same style, where the cosine does not;
- else (the item abstains: too few anchors) the cosine's excess over a stricter bar, ABSTAIN_COSINE, rescaled to
  [0, 1]: (cosine - ABSTAIN_COSINE) / (1 - ABSTAIN_COSINE), 0 below the bar. Only a near-identical passage scores.
An item's score is the largest over its candidate windows. A reviewer can check one pair by hand from the cosine,
the verdict and these two constants.

Threshold (`threshold_from_null`): null items are items that cannot be in the corpus (written after it was
collected, or freshly written), scored against it the same way. The threshold is the smallest t such that at most
`target_rate` of the null items score >= t, with scoring/impact/splits.flag_at_fpr's tie rule (tied null scores
are admitted whole or not at all, so the realised rate is at most the target). The realised rate is a proportion
of n_null items, so it comes with a one-sided 95% Clopper-Pearson upper bound (scoring/stats/proportions.py): with
500 null items and none flagged the false-flag rate can still be 0.6%.
The threshold is chosen on the same null it is measured on, which flatters the realised rate; `null_rate` measures a
threshold on a second, held-out null.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring.impact.splits import flag_at_fpr
from scoring.stats.proportions import clopper_pearson_ci

# all-MiniLM-L6-v2 on hand-made pairs (verify.py): other GSM8K problems 0.31-0.57, English rephrases 0.92-0.94. A
# translation scored 0.36 under that English-only model, below the floor: translations need a multilingual embedder.
COSINE_FLOOR = 0.5
ABSTAIN_COSINE = 0.9  # without anchors to check, only passages about as close as a rephrase count
# The threshold when no null is given, from the study (bench/semantic_study.py, results in
# bench/results/semantic_study*.md): GSM8K-style null items searched (top 100, all-MiniLM-L6-v2) against 2,000 State
# of the Union documents that hold 3,000 planted siblings of the same templates. 1.0 means every anchor of a
# checkable item is in the window (one missing name forgiven, verify.py), and an abstaining item is flagged only on a
# cosine of 1. The smallest threshold that holds seed 0's 1,000-item null at 1% is 0.9; it found no rephrase that 1.0
# misses and flagged 1.4% of the never-planted items against 0.5%, so the default stays at 1.0. DEFAULT_CALIBRATION is
# what three independent draws' nulls (seeds 0, 1, 2: other items, rephrases, documents) measured at 1.0, pooled: 4,
# 10 and 2 of 1,000. A report states it as its expected false-flag rate; it transfers to benchmarks and corpora like
# the study's, and a --null drawn from the user's own benchmark is the better calibration.
DEFAULT_THRESHOLD = 1.0
DEFAULT_CALIBRATION = {"n_null": 3000, "n_flagged": 16, "rate": 16 / 3000, "upper_bound": 0.0081,
                       "source": "bench/results/semantic_study.md, _seed1.md, _seed2.md (three draws of GSM8K-style "
                                 "items against State of the Union text with same-template siblings planted; "
                                 "all-MiniLM-L6-v2, top 100)"}
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Calibration:
    threshold: float  # flag an item when its decision score is >= threshold
    n_null: int
    n_flagged: int  # null items at or above the threshold
    expected_false_flag_rate: float  # n_flagged / n_null
    upper_bound: float  # one-sided 95% Clopper-Pearson upper bound on the false-flag rate


def decision_score(cosine, verifier_score, abstain):
    """The module docstring's rule, elementwise over arrays (or on scalars: a float back)."""
    c = np.asarray(cosine, dtype=np.float64)
    v = np.asarray(verifier_score, dtype=np.float64)
    a = np.asarray(abstain, dtype=bool)
    fallback = np.clip((c - ABSTAIN_COSINE) / (1 - ABSTAIN_COSINE), 0.0, 1.0)
    out = np.where(c < COSINE_FLOOR, 0.0, np.where(a, fallback, v))
    return float(out) if out.ndim == 0 else out


def null_rate(null_scores, threshold: float) -> Calibration:
    """How many null items a threshold flags (score >= threshold; NaN scores left out of n_null), with the one-sided
    upper bound."""
    s = np.asarray(null_scores, dtype=np.float64)
    s = s[~np.isnan(s)]
    if not s.size:
        raise ValueError("a null rate needs at least one null score that is not NaN")
    k = int((s >= threshold).sum())
    return Calibration(float(threshold), int(s.size), k, k / s.size, false_flag_bound(k, s.size))


def false_flag_bound(k: int, n: int) -> float:
    """The one-sided 95% Clopper-Pearson upper bound on a false-flag rate of k flagged in n: the upper end of the
    two-sided interval at 90%."""
    return clopper_pearson_ci(k, n, alpha=2 * (1 - CONFIDENCE))[1]


def threshold_from_null(null_scores, target_rate: float) -> Calibration:
    """The smallest threshold that flags at most `target_rate` of the null items (ties whole), and what it flags."""
    _, threshold = flag_at_fpr(np.zeros(0), null_scores, target_rate)
    return null_rate(null_scores, threshold)
