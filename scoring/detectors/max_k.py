"""Max-K%: the mirror of Min-K%, over the most likely tokens."""
import numpy as np

from scoring.detectors.base import register, top_k_mean


@register("max_k", k=0.2)
def max_k(stats, views, k):
    """Mean log p over the k fraction of positions with the highest log p."""
    return np.array([top_k_mean(lp, k) for lp in stats.lp])
