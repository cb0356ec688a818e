"""ReCaLL (Xie et al., 2024): how conditioning on a non-member prefix changes the text's log-likelihood."""
import numpy as np

from scoring.detectors.base import mean_or_nan, prefix_aligned, register
from scoring.lm.views import PREFIXED


@register("recall", needs=(PREFIXED,))
def recall(stats, views):
    """LL(x | P) / LL(x), with LL the mean log p. A non-member prefix lowers a member's LL more, so the ratio of
    two negatives grows: larger = member. The prefixed view also predicts x's first token (from the prefix);
    it is dropped so both means cover the same tokens. The texts in P are excluded from evaluation by the job."""
    return np.array([mean_or_nan(prefix_aligned(lp_pre, lp, first)) / mean_or_nan(lp)
                     for lp, lp_pre, first in zip(stats.lp, views[PREFIXED].lp, stats.first_predicted)])
