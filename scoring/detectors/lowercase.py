"""Lowercase (Carlini et al.; baseline in Shi et al.): how much worse the lowercased text scores."""
import numpy as np

from scoring.detectors.base import mean_or_nan, register
from scoring.lm.views import LOWERCASE


@register("lowercase", needs=(LOWERCASE,))
def lowercase(stats, views):
    """log-ppl(lowercased) / log-ppl(original) = mean lp(lower) / mean lp(orig); a memorised original makes
    the ratio large."""
    low = views[LOWERCASE]
    return np.array([mean_or_nan(a) / mean_or_nan(b) for a, b in zip(low.lp, stats.lp)])
