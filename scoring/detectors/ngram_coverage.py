"""N-gram coverage attack (Hallinan et al., CoLM 2025) and its creativity-index variant: how much of a sampled
continuation of the passage's first half repeats its true second half, token run for token run.

Per sample: the share of its tokens inside runs of >= n tokens that also occur in the true continuation
(scoring/generation/text.coverage; `unique`: a repeated run counts once); the creativity index sums that share
over n = min_n..max_n. Over the samples: the max (the paper's best aggregation) or the mean. Larger = member."""
import numpy as np

from scoring.detectors.base import register
from scoring.generation.kinds import kind_key
from scoring.generation.text import coverage, creativity_index as creativity

AGGREGATIONS = {"max": np.max, "mean": np.mean, "median": np.median, "min": np.min}


def continuation_kind(params) -> tuple[str, ...]:
    return (kind_key("continuation", prefix=float(params["prefix"])),)


def aggregate(values, agg: str) -> float:
    if agg not in AGGREGATIONS:
        raise ValueError(f"agg must be one of {', '.join(AGGREGATIONS)}; got {agg!r}")
    return float(AGGREGATIONS[agg](values)) if len(values) else float("nan")


@register("ngram_coverage", input="generations", needs=continuation_kind, prefix=0.5, n=3, agg="max",
          optional={"unique": True})
def ngram_coverage(row, gens, prefix, n, agg, unique):
    """Aggregated share of a continuation's tokens covered by >= n-token runs of the true continuation."""
    (kind,) = continuation_kind({"prefix": prefix})
    return aggregate([coverage(g["text"], g["target"], int(n), unique) for g in gens[kind]], agg)


@register("creativity_index", input="generations", needs=continuation_kind, prefix=0.5, min_n=2, max_n=12,
          agg="max", optional={"unique": True})
def creativity_index(row, gens, prefix, min_n, max_n, agg, unique):
    """Aggregated sum over n = min_n..max_n of the n-gram coverage (higher = more copied)."""
    (kind,) = continuation_kind({"prefix": prefix})
    return aggregate([creativity(g["text"], g["target"], int(min_n), int(max_n), unique) for g in gens[kind]], agg)
