"""SaMIA (Kaneko et al., 2024): the mean over sampled continuations of the passage's first half of their ROUGE-1
recall against its true second half (whitespace words, case and punctuation kept; clipped counts / the true
continuation's words). `zlib=True` weights each sample by the zlib-compressed size of its words (SaMIA*zlib),
which discounts repetitive samples. Reads the same continuations as `ngram_coverage`. Larger = member."""
import numpy as np

from scoring.detectors.base import register
from scoring.detectors.ngram_coverage import continuation_kind
from scoring.generation.text import rouge1_recall, zlib_size


@register("samia", input="generations", needs=continuation_kind, prefix=0.5, optional={"zlib": False})
def samia(row, gens, prefix, zlib):
    """Mean ROUGE-1 recall of the sampled continuations against the true one (x zlib size with zlib=True)."""
    (kind,) = continuation_kind({"prefix": prefix})
    values = [rouge1_recall(g["text"], g["target"]) * (zlib_size(g["text"]) if zlib else 1) for g in gens[kind]]
    return float(np.mean(values)) if values else float("nan")
