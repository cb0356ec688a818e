"""Which benchmark items leaked: the split each item falls in, from overlap shares or from a detector's scores.

The splits follow lm-evaluation-harness's decontamination report (issue 1056): `clean` (nothing of the item was
seen), `input_leaked` (the question was seen, its answer not), `input_and_answer_leaked` (both). `answer_leaked`
(the answer string seen, the question not) is kept apart rather than folded into clean or leaked: a short answer
("4", "Paris") turns up in any corpus, so it is weak evidence, and the report shows that split only when it is
not empty. `rephrased_leaked` (the question found in a corpus in other words by `overlap --semantic`, and not
verbatim) is Tidemark's own fifth: a question copied verbatim is usually found by the semantic pass too, and the
verbatim split, the stronger evidence, names it; so this split holds the items only a rephrase of the question
gives away (a rephrased question whose bare answer string was also seen is here too, not in the weak
`answer_leaked`). It is not clean either: the clean subset is clean of rephrases as well as of copies.

Evidence comes in three kinds:
- an overlap share (the fraction of an item's n-grams found in the corpus): GPT-3 and lm-eval call an item dirty
  if any 13-gram overlaps, i.e. share > 0;
- a rephrase decision (semantic.parquet's `rephrased`: the item's decision score, from its best candidate corpus
  window, at or above a threshold set on items that cannot be in the corpus, or an LLM judge's verdict where one
  was asked);
- a membership detector's score: a threshold calibrated on items the model cannot have seen (published after its
  cutoff, or freshly written), so that at most a chosen share of those would be flagged.
"""
from __future__ import annotations

import math

import numpy as np

SPLITS = ("clean", "input_leaked", "input_and_answer_leaked", "answer_leaked", "rephrased_leaked")


def _as_bool(name: str, values) -> np.ndarray:
    """A 1-D boolean array. Floats are refused: NaN would silently become True under astype(bool)."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.dtype.kind == "b":
        return a
    if a.dtype.kind in "iu" and np.isin(a, (0, 1)).all():
        return a.astype(bool)
    raise ValueError(f"{name} must be booleans (or 0/1 integers), got dtype {a.dtype}")


def label_splits(input_leaked, answer_leaked=None, rephrased=None) -> np.ndarray:
    """Each item's split name (one of SPLITS). Without answer evidence (`answer_leaked` None) an item is only
    `clean` or `input_leaked`: saying "input and answer" would claim evidence nobody looked for. `rephrased` (None:
    no semantic evidence) puts an item whose question no verbatim evidence flagged into `rephrased_leaked`."""
    inp = _as_bool("input_leaked", input_leaked)
    others = {}
    for name, values in (("answer_leaked", answer_leaked), ("rephrased", rephrased)):
        others[name] = np.zeros(inp.size, dtype=bool) if values is None else _as_bool(name, values)
        if others[name].size != inp.size:
            raise ValueError(f"input_leaked has {inp.size} items, {name} {others[name].size}")
    ans, reph = others["answer_leaked"], others["rephrased"]
    # codes index SPLITS: 0 clean, 1 input only, 2 both, 3 answer only, 4 the question rephrased, not verbatim
    codes = np.where(inp, np.where(ans, 2, 1), np.where(reph, 4, np.where(ans, 3, 0)))
    return np.asarray(SPLITS)[codes]


def leaked_from_share(share, threshold: float = 0.0) -> np.ndarray:
    """share > threshold. The default 0 is the GPT-3 / lm-eval rule (any overlapping 13-gram makes an item dirty).
    A NaN share means the item was not checked: it is returned False (no evidence is not evidence of a leak), and
    the caller counts those items (`np.isnan(share).sum()`) so the report can say how many went unchecked."""
    s = np.asarray(share, dtype=np.float64)
    if s.ndim != 1:
        raise ValueError(f"share must be one-dimensional, got shape {s.shape}")
    with np.errstate(invalid="ignore"):  # NaN > t is False, which is what we want
        return s > threshold


def flag_at_fpr(scores, reference_scores, fpr: float = 0.05) -> tuple[np.ndarray, float]:
    """(flags, threshold): flags = scores >= threshold, where larger scores are more member-like and `threshold`
    is set on reference scores (items the model cannot have seen) so that at most `fpr` of them are flagged.

    Tie rule, exactly: let k = floor(fpr · n_ref). The threshold is the smallest reference score v with
    #{reference ≥ v} ≤ k. Reference scores tied at one value are admitted whole or not at all, so a tie that would
    overrun the budget is left out and the threshold moves up to the next larger reference value; the realised
    reference FPR, #{reference ≥ threshold} / n_ref, is then below `fpr` rather than above it. When no reference
    value qualifies (k = 0, or the largest reference value is tied more than k times) the threshold is the float
    just above the largest reference score, so only scores above every reference score are flagged.

    Scores equal to the threshold are flagged (>=). NaN scores are never flagged; NaN reference scores are left
    out of n_ref."""
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    s = np.asarray(scores, dtype=np.float64)
    ref = np.asarray(reference_scores, dtype=np.float64)
    ref = ref[~np.isnan(ref)]
    if not ref.size:
        raise ValueError("flag_at_fpr needs at least one reference score that is not NaN")
    # fpr · n is often a float a hair below an integer (0.29 · 100 = 28.999…): the epsilon keeps it from losing one.
    k = math.floor(fpr * ref.size + 1e-9)
    values, counts = np.unique(ref, return_counts=True)  # ascending
    at_or_above = np.cumsum(counts[::-1])[::-1]  # at_or_above[i] = #{ref >= values[i]}, decreasing in i
    ok = np.flatnonzero(at_or_above <= k)
    threshold = float(values[ok[0]]) if ok.size else float(np.nextafter(values[-1], np.inf))
    with np.errstate(invalid="ignore"):
        return s >= threshold, threshold
