"""LOSS (Yeom et al.; baseline in Shi et al.): the mean log-likelihood of the text, i.e. minus the loss."""
import numpy as np

from scoring.detectors.base import mean_or_nan, register


@register("loss")
def loss(stats, views):
    """Mean log p of the true tokens (= −loss); members have lower loss."""
    return np.array([mean_or_nan(lp) for lp in stats.lp])
