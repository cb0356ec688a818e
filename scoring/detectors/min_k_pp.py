"""Min-K%++ (Zhang et al.): standardise each token's log p by the model's own next-token distribution."""
import numpy as np

from scoring.detectors.base import bottom_k_mean, register

EPS = 1e-8  # a one-hot distribution has sigma 0; its z is then 0·huge, so keep the division finite


@register("min_k_pp", k=0.2, optional={"topk": 0}, full_distribution=True)
def min_k_pp(stats, views, k, topk):
    """Mean of the bottom k fraction of z_i = (lp_i − μ_i) / σ_i, with μ, σ of log p under p(·|t_<i). Over a
    served model's API only the top-n is known: `topk=N` accepts μ, σ of the renormalised top-N instead (an
    approximation, named in the column); without it the detector is refused there. It does not change the
    arithmetic: the token stats already hold what the scorer could measure (see their lp_source)."""
    return np.array(
        [bottom_k_mean((lp - mu) / np.maximum(sd, EPS), k) for lp, mu, sd in zip(stats.lp, stats.mu, stats.sigma)]
    )
