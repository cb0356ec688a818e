"""Dataset inference (Maini et al., 2024, "LLM Dataset Inference"): is a *set* of texts (the suspect set, which a
rights holder says was trained on) scored as more member-like than a set from the same distribution that was not
(the validation set)? Single-text detectors are weak and can be fooled by distribution shift; aggregating many of
them over many texts, with a held-out test, gives a calibrated answer.

  1. features: every detector's score per text (scoring/detectors), for both sets;
  2. split each set in two halves (seeded): A to learn, B to test;
  3. on A, standardise the features and fit a linear model, suspect = 1 vs validation = 0 (least squares with a
     small ridge: the weights are the "which detectors carry the signal" answer, in standard deviations);
  4. on B, score every text with the model, and run a one-sided Welch t-test that the suspect texts score higher.

The test is valid because the model never saw B: if the model was not trained on the suspect set, both sets are
draws from one distribution, their B scores are exchangeable, and p is (approximately) uniform. Pure numpy/scipy;
jobs/commands/dataset_inference.py runs the scoring and calls this.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

RIDGE = 1e-3  # keeps the fit defined when two detectors are (nearly) collinear, e.g. loss and min_k at k=1


@dataclass
class WelchT:
    t: float
    df: float
    p_value: float  # one-sided: suspect mean > validation mean


def welch_one_sided(a: np.ndarray, b: np.ndarray) -> WelchT:
    """t = (mean a − mean b) / sqrt(s_a²/n_a + s_b²/n_b), Welch–Satterthwaite df, p = P(T_df ≥ t)."""
    from scipy import stats

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = np.sqrt(va + vb)
    if se == 0:
        return WelchT(0.0, float(a.size + b.size - 2), 0.5)
    t = (a.mean() - b.mean()) / se
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    return WelchT(float(t), float(df), float(stats.t.sf(t, df)))


def halves(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(n)
    return np.sort(order[: n // 2]), np.sort(order[n // 2:])


def dataset_inference(suspect: np.ndarray, validation: np.ndarray, names: Sequence[str], seed: int = 0) -> dict:
    """`suspect`, `validation`: [texts, features] score matrices with the same columns (`names`). Non-finite
    values are imputed with the learning half's median of that feature. Returns the test and what it used."""
    suspect, validation = np.asarray(suspect, dtype=np.float64), np.asarray(validation, dtype=np.float64)
    if suspect.shape[1] != len(names) or validation.shape[1] != len(names):
        raise ValueError("feature matrices and names disagree")
    if min(len(suspect), len(validation)) < 4:
        raise ValueError(f"need at least 4 texts in each set (two per half); got {len(suspect)} suspect and "
                         f"{len(validation)} validation")
    rng = np.random.default_rng(seed)
    s_a, s_b = halves(len(suspect), rng)
    v_a, v_b = halves(len(validation), rng)
    x_a = np.vstack([suspect[s_a], validation[v_a]])
    y_a = np.concatenate([np.ones(len(s_a)), np.zeros(len(v_a))])
    median = np.nanmedian(np.where(np.isfinite(x_a), x_a, np.nan), axis=0)
    median = np.where(np.isfinite(median), median, 0.0)

    def clean(x):
        return np.where(np.isfinite(x), x, median)

    x_a = clean(x_a)
    mean, std = x_a.mean(axis=0), x_a.std(axis=0)
    used = std > 0  # a constant feature carries nothing and cannot be standardised
    z_a = (x_a[:, used] - mean[used]) / std[used]
    design = np.hstack([np.ones((len(z_a), 1)), z_a])
    penalty = RIDGE * np.eye(design.shape[1])
    penalty[0, 0] = 0.0  # no shrinkage of the intercept
    coef = np.linalg.solve(design.T @ design + penalty, design.T @ y_a)

    def predict(x):
        return coef[0] + ((clean(x)[:, used] - mean[used]) / std[used]) @ coef[1:]

    out_s, out_v = predict(suspect[s_b]), predict(validation[v_b])
    test = welch_one_sided(out_s, out_v)
    weights = dict.fromkeys(names, 0.0)
    for name, w in zip(np.asarray(names)[used], coef[1:]):
        weights[str(name)] = float(w)
    return {"p_value": test.p_value, "t": test.t, "df": test.df, "weights": weights, "intercept": float(coef[0]),
            "features_used": [str(n) for n in np.asarray(names)[used]],
            "sizes": {"suspect_learn": int(len(s_a)), "suspect_test": int(len(s_b)),
                      "validation_learn": int(len(v_a)), "validation_test": int(len(v_b))},
            "test_means": {"suspect": float(out_s.mean()), "validation": float(out_v.mean())}, "seed": seed,
            "test_scores": {"suspect": out_s.tolist(), "validation": out_v.tolist()}}


MEANING = (
    "p is the probability, if the suspect texts were NOT used in training (so that they and the validation texts "
    "are exchangeable draws from one distribution), of seeing the suspect half score at least this much higher "
    "than the validation half under a model fitted on the other halves. A small p (e.g. < 0.01) is evidence that "
    "the model treats the suspect set as training data. It is not the probability that the set was trained on, it "
    "says nothing about any single text, and it is only as valid as the validation set: texts that differ from "
    "the suspect set in time, topic or style (distribution shift) also give small p without any training. A large "
    "p is absence of evidence, not evidence of absence (too few texts, weak detectors, or a model that did not "
    "memorise)."
)
