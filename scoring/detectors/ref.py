"""Smaller Ref (Carlini et al.; baseline in Shi et al.): calibrate the target's loss by a reference model's."""
import numpy as np

from scoring.detectors.base import mean_or_nan, register
from scoring.lm.views import REF


@register("ref", needs=(REF,))
def ref(stats, views):
    """−(target log-ppl − reference log-ppl) = mean lp(target) − mean lp(ref). Each model uses its own tokens,
    so the per-token means are compared, not sums."""
    other = views[REF]
    return np.array([mean_or_nan(a) - mean_or_nan(b) for a, b in zip(stats.lp, other.lp)])
