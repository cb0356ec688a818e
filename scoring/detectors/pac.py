"""PAC, Polarized Augment Calibration (Ye et al., 2024)."""
import numpy as np

from scoring.detectors.base import register, top_k_mean, bottom_k_mean
from scoring.lm.views import pac_view


def polarized_distance(lp: np.ndarray, k1: float, k2: float) -> float:
    """L(z) = mean of the top k1 fraction of log p − mean of the bottom k2 fraction."""
    return top_k_mean(lp, k1) - bottom_k_mean(lp, k2)


def _copies(params) -> tuple[str, ...]:
    return tuple(pac_view(params["ratio"], params["seed"], j) for j in range(params["n"]))


@register("pac", needs=_copies, k1=0.05, k2=0.3, n=5, ratio=0.3, seed=0)
def pac(stats, views, k1, k2, n, ratio, seed):
    """L(z) − mean over N swap-augmented copies of L(z~); each copy swaps two random tokens round(ratio·|z|)
    times (seeded per text id). Members are "polarised": augmentation hurts them more."""
    copies = [views[v] for v in _copies({"ratio": ratio, "seed": seed, "n": n})]
    out = []
    for i, lp in enumerate(stats.lp):
        aug = [polarized_distance(c.lp[i], k1, k2) for c in copies]
        out.append(polarized_distance(lp, k1, k2) - float(np.mean(aug)))
    return np.array(out)
