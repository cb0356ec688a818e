"""GradNorm, as MIMIR computes it (mimir/attacks/gradnorm.py, after arXiv 2402.17012): the mean loss over the
text's tokens is back-propagated, each parameter tensor's gradient is reduced to its p-norm (p = inf by default;
1 and 2), the norms are averaged over tensors, and the score is minus that mean: a text the model was trained on
sits nearer a minimum, so its gradient is smaller. Larger = member.

The gradients come from the `grad` view, back-propagated on the scorer actors (scoring/lm/gradnorm.py): the model's
weights are needed, so over a served model's API it is refused by name. MIMIR's own ROC code flips every raw score,
so its reported "gradnorm" AUC ranks larger gradients as members: 1 minus this detector's AUC."""
import numpy as np

from scoring.detectors.base import register
from scoring.lm.gradnorm import split_norms
from scoring.lm.views import GRAD


@register("gradnorm", needs=(GRAD,), weights_only=True, opt_in=True, p="inf")
def gradnorm(stats, views, p):
    """-(mean over parameter tensors of the p-norm of the text's loss gradient)."""
    return np.array([-float(np.mean(split_norms(g, str(p)))) if len(g) else float("nan")
                     for g in views[GRAD].grad_norms])
