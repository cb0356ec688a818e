"""Con-ReCall (Wang et al., COLING 2025; computed as Fast-MIA's src/methods/conrecall.py computes it): the text's
log-likelihood with a prefix of `shots` labelled non-member texts and with a prefix of `shots` labelled member
texts, contrasted:

    score = (LL(x | P_nonmember) - gamma * LL(x | P_member)) / LL(x)        LL = mean log p of x's tokens

(Fast-MIA writes the same ratio with losses.) Larger = member. The prefixes are the `shots` members and the `shots`
non-members with the smallest seeded hash of their id (jobs/plane/survey.py: the same rows however the job is cut
into parts), joined with nothing between them as the official code and Fast-MIA join them; the method reads
labels, so those rows are scored but left out of every metric, and run.json and the report name them. As for
ReCaLL, a prefixed view's prediction of x's first token (which the unprefixed view cannot make) is dropped, so the
three means cover the same tokens."""
import numpy as np

from scoring.detectors.base import mean_or_nan, prefix_aligned, register
from scoring.lm.views import labelled_prefix_view


def con_recall_views(params) -> tuple[str, ...]:
    return (labelled_prefix_view("nonmember", params["shots"]), labelled_prefix_view("member", params["shots"]))


@register("con_recall", needs=con_recall_views, opt_in=True, shots=10, gamma=0.5)
def con_recall(stats, views, shots, gamma):
    """(LL(x | non-member prefix) - gamma LL(x | member prefix)) / LL(x), LL the mean log p."""
    nonmember, member = (views[v] for v in con_recall_views({"shots": shots}))
    return np.array([(mean_or_nan(prefix_aligned(nm, lp, f)) - gamma * mean_or_nan(prefix_aligned(m, lp, f)))
                     / mean_or_nan(lp) for lp, nm, m, f in zip(stats.lp, nonmember.lp, member.lp, stats.first_predicted)])
