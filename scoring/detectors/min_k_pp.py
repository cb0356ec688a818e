"""Min-K%++ (Zhang et al.): standardise each token's log p by the model's own next-token distribution."""
import numpy as np

from scoring.detectors.base import bottom_k_mean, register

EPS = 1e-8  # a one-hot distribution has sigma 0; its z is then 0·huge, so keep the division finite


@register("min_k_pp", k=0.2)
def min_k_pp(stats, views, k):
    """Mean of the bottom k fraction of z_i = (lp_i − μ_i) / σ_i, with μ, σ of log p under p(·|t_<i)."""
    return np.array(
        [bottom_k_mean((lp - mu) / np.maximum(sd, EPS), k) for lp, mu, sd in zip(stats.lp, stats.mu, stats.sigma)]
    )
