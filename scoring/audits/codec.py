"""CoDeC's set-level statistics (Zawalski et al., ICLR 2026): from the per-sample deltas (mean log p with `shots`
other samples of the set in context - without), the contamination score is the share of samples whose likelihood
drops with context (delta < 0), with a Wilson 95% interval, beside the mean delta and its normal 95% interval.
Accumulated part by part (`DeltaSummary.add`), so the driver never holds the set.

What it shows: a model that memorised a set is disturbed by in-context examples of it (they do not help it
predict what it already knows), while unseen text of the same kind is helped; the authors separate seen from unseen
sets at 99.9% dataset-level AUC on their models, read above 0.8 as a red flag, and report unseen but varied sets
reaching 0.5-0.6. What it does not show: which samples were seen; and on small models the share saturates (in
context, text of the same source disturbs a tiny model either way), where the mean delta still separates sets
(ENVIRONMENT.md: -2.3 vs -0.9 on a memorised and an unseen set). It needs no held-out set, but it is a score, not
a p-value: compare it with the same model's score on a set it cannot have seen, or with other models.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

HIGH, LOW = 0.8, 0.4  # the authors' reading: above 0.8 a red flag; below 0.4 little sign of contamination

MEANING = ("contamination_score is the share of samples whose mean log-likelihood drops when other samples of the "
           "same set are put before them (delta < 0). In-context examples help a model predict text it has not "
           "seen and disturb text it has memorised, so a high share points to the set having been trained on "
           f"(the authors read above {HIGH} as a red flag and see 0.5-0.6 on unseen but varied sets). It is a score, "
           "not a probability or a p-value: it says nothing about single samples, tiny models saturate it (use "
           "mean_delta there), and it is best read beside the same model's score on a set it cannot have seen.")


@dataclass
class DeltaSummary:
    n: int = 0
    negative: int = 0
    total: float = 0.0
    squares: float = 0.0
    skipped: int = 0  # samples without a finite delta (too short, their context view failed)
    histogram: list = field(default_factory=lambda: [0] * 40)  # deltas in [-4, 4) by 0.2 (the ends clipped)

    def add(self, deltas: np.ndarray) -> None:
        d = np.asarray(deltas, dtype=np.float64)
        ok = np.isfinite(d)
        self.skipped += int((~ok).sum())
        d = d[ok]
        self.n += int(d.size)
        self.negative += int((d < 0).sum())
        self.total += float(d.sum())
        self.squares += float((d * d).sum())
        bins = np.clip(((d + 4.0) / 0.2).astype(np.int64), 0, 39)
        for b, c in zip(*np.unique(bins, return_counts=True)):
            self.histogram[int(b)] += int(c)

    def result(self) -> dict:
        from scoring.stats.proportions import wilson_ci

        if not self.n:
            raise ValueError("no sample has a delta: every one was too short or failed")
        mean = self.total / self.n
        var = max(0.0, (self.squares - self.n * mean * mean) / max(1, self.n - 1))
        half = 1.96 * math.sqrt(var / self.n)
        share = self.negative / self.n
        reading = "high" if share > HIGH else "low" if share < LOW else "between"
        return {"contamination_score": share, "contamination_ci": list(wilson_ci(self.negative, self.n)),
                "mean_delta": mean, "mean_delta_ci": [mean - half, mean + half], "delta_sd": math.sqrt(var),
                "samples": self.n, "samples_negative": self.negative, "samples_skipped": self.skipped,
                "reading": reading, "histogram": {"lo": -4.0, "width": 0.2, "counts": list(self.histogram)}}
