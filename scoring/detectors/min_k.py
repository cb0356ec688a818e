"""Min-K% Prob (Shi et al., ICLR 2024)."""
import numpy as np

from scoring.detectors.base import bottom_k_mean, register


@register("min_k", k=0.2)
def min_k(stats, views, k):
    """Mean log p over the k fraction of positions with the lowest log p (at least one position)."""
    return np.array([bottom_k_mean(lp, k) for lp in stats.lp])
