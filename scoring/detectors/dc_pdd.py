"""DC-PDD (Zhang et al., 2024): divergence-calibrated detection with token frequencies from a reference corpus."""
import numpy as np

from scoring.detectors.base import register

TOKEN_FREQ = "token_freq"  # a resource: counts per token id over a reference corpus (np.ndarray)


def laplace_frequency(counts: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """(count + 1) / (total + |V|); ids beyond the table count as unseen."""
    counts = np.asarray(counts, dtype=np.float64)
    total, vocab = counts.sum(), counts.size
    c = np.where(token_ids < vocab, counts[np.minimum(token_ids, vocab - 1)], 0.0)
    return (c + 1.0) / (total + vocab)


@register("dc_pdd", needs=(TOKEN_FREQ,), a=0.01)
def dc_pdd(stats, views, a):
    """Mean over the text's first occurrences of each token of min(p_i · log(1/f(t_i)), a). The paper states
    "larger = member" for this mean; the reference code negates it only because its own convention is
    lower = member, so no negation here."""
    counts = views[TOKEN_FREQ]
    out = []
    for ids, lp, first in zip(stats.token_ids, stats.lp, stats.first_predicted):
        targets = ids[first : first + len(lp)]
        if not len(targets):
            out.append(float("nan"))
            continue
        _, first_idx = np.unique(targets, return_index=True)
        first_idx.sort()
        alpha = np.exp(lp[first_idx]) * -np.log(laplace_frequency(counts, targets[first_idx]))
        out.append(float(np.mean(np.minimum(alpha, a))))
    return np.array(out)


def count_tokens(token_lists, vocab_size: int) -> np.ndarray:
    counts = np.zeros(int(vocab_size), dtype=np.int64)
    for ids in token_lists:
        ids = np.asarray(ids, dtype=np.int64)
        np.add.at(counts, ids[ids < vocab_size], 1)
    return counts
