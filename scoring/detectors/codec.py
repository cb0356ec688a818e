"""CoDeC (Zawalski et al., ICLR 2026, arXiv 2510.27055): how in-context examples of the same set change a text's
likelihood. Per text, delta = mean log p of its tokens with `shots` other samples of its set before it (joined by
blank lines, as the authors' demo joins them) - the same mean without them. In-context examples help text the model
has not seen and disturb text it has memorised, so delta < 0 is the contaminated sign; the set's score is the share
of its samples with delta < 0 (`tidemark dataset-inference --method codec`).

As a per-text score this detector returns -delta (larger = member). Both means cover the same tokens: the
prefixed view's prediction of the text's first token, which the unprefixed view cannot make, is dropped; `skip`
drops that many more leading tokens from both (the demo skipped 10). The context view needs the set's pool, which
only dataset-inference builds, so `evaluate` refuses it by name."""
import numpy as np

from scoring.detectors.base import mean_or_nan, prefix_aligned, register
from scoring.lm.views import codec_view


def codec_views(params) -> tuple[str, ...]:
    return (codec_view(params["shots"], params["seed"]),)


@register("codec", needs=codec_views, opt_in=True, shots=3, seed=0, optional={"skip": 0})
def codec(stats, views, shots, seed, skip):
    """-(mean log p with in-set context - mean log p without), over the text's tokens."""
    ctx = views[codec_view(shots, seed)]
    out = []
    for lp, lp_ctx, first in zip(stats.lp, ctx.lp, stats.first_predicted):
        with_ctx = prefix_aligned(lp_ctx, lp, first)
        if len(with_ctx) != len(lp) or len(lp) <= skip:
            out.append(float("nan"))
            continue
        out.append(-(mean_or_nan(with_ctx[skip:]) - mean_or_nan(lp[skip:])))
    return np.array(out)
