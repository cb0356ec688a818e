"""Neighbourhood attack (Mattern et al., 2023): is the passage's loss unusually low next to texts one word away?"""
import numpy as np

from scoring.detectors.base import register
from scoring.lm.views import neighbour_view


def _neighbours(params) -> tuple[str, ...]:
    return tuple(neighbour_view(params["dropout"], params["seed"], j) for j in range(params["n"]))


def passage_loss(lp: np.ndarray) -> float:
    """Mean negative log-likelihood of the predicted tokens: exactly minus the `loss` detector's score."""
    return -float(np.mean(lp)) if len(lp) else float("nan")


@register("neighbour", needs=_neighbours, n=25, dropout=0.7, seed=0)
def neighbour(stats, views, n, dropout, seed):
    """mean over the passage's neighbours of loss(neighbour) − loss(passage), loss = mean token NLL under the
    target model. Neighbours swap one word for a masked LM's pick (--neighbour-model; scoring/lm/neighbours.py).
    A member sits in a dip of the loss: its neighbours cost more, so larger = member. Neighbours the MLM could not
    offer (short passages) are left out of the mean; none at all gives NaN. Cost: 1 + n target passes."""
    copies = [views[v] for v in _neighbours({"dropout": dropout, "seed": seed, "n": n})]
    out = []
    for i, lp in enumerate(stats.lp):
        losses = [passage_loss(c.lp[i]) for c in copies if len(c.lp[i])]
        out.append(float(np.mean(losses)) - passage_loss(lp) if losses else float("nan"))
    return np.array(out)
