"""Zlib (Carlini et al.; baseline in Shi et al.): log-perplexity relative to the text's zlib-compressed size."""
import zlib

import numpy as np

from scoring.detectors.base import mean_or_nan, register


@register("zlib")
def zlib_ratio(stats, views):
    """Mean log p divided by the zlib-compressed length in bytes: −log-ppl / zlib size, so larger = member."""
    out = []
    for lp, text in zip(stats.lp, stats.texts):
        size = len(zlib.compress((text or "").encode("utf-8")))
        out.append(mean_or_nan(lp) / size if size else float("nan"))
    return np.array(out)
