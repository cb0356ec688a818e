"""Per-document token statistics for document-level membership: one pass of the shared Scorer over the whole
document with context C and stride C − 1 (every token but the first is predicted once), keeping lp and lp_max per
position and, when the GP reference is wanted, the sum of the full predicted distribution over positions.

GP (Meeus et al.'s "general probability") is the mean of p(·|t_<i) over every position of the reference
documents, so it needs the whole distribution, which the token-stats table does not keep; `GPScorer` adds that one
reduction to the Scorer rather than storing positions × vocabulary numbers.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from scoring.lm.scorer import Scorer

DOC_STATS_SCHEMA = pa.schema([
    pa.field("id", pa.string()), pa.field("context", pa.int32()), pa.field("token_ids", pa.list_(pa.int32())),
    pa.field("lp", pa.list_(pa.float32())), pa.field("lp_max", pa.list_(pa.float32())),
    pa.field("p_sum", pa.list_(pa.float32())),  # Σ over predicted positions of p(v|t_<i), per vocabulary id v
    pa.field("n_windows", pa.int32()), pa.field("error", pa.string()),
])


class GPScorer(Scorer):
    """A Scorer that also returns `p_sum` (vocabulary-sized) per sequence. The LM head runs a second time on the
    predicted positions for it; a window that fails contributes nothing (the row then carries an error)."""

    def score(self, token_ids, first_predicted=None):
        self._sums: dict[int, np.ndarray] = {}
        out = super().score(token_ids, first_predicted)
        vocab = self.lm_head.weight.shape[0]
        for i, o in enumerate(out):
            o["p_sum"] = None if o["error"] else self._sums.get(i, np.zeros(vocab))
        return out

    def _forward(self, seqs, windows):
        self._windows = list(windows)
        out = super()._forward(seqs, windows)  # raises on failure, before anything is added below
        for w, v in zip(self._windows, self._batch_sums):
            self._sums[w.seq] = self._sums.get(w.seq, 0) + v
        return out

    def _reduce(self, hidden, targets):
        stats = super()._reduce(hidden, targets)
        torch = self.torch
        sizes = torch.tensor([w.end - w.pred_from for w in self._windows])
        seg = torch.repeat_interleave(torch.arange(len(self._windows)), sizes).to(hidden.device)
        vocab = self.lm_head.weight.shape[0]
        rows = max(1, self.row_chunk_elems // vocab)
        sums = torch.zeros((len(self._windows), vocab), dtype=torch.float64, device=hidden.device)
        for s in range(0, hidden.shape[0], rows):
            logits = self.lm_head(hidden[s:s + rows]).float()
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            sums.index_add_(0, seg[s:s + rows], torch.softmax(logits, dim=-1).double())
        self._batch_sums = list(sums.cpu().numpy())
        return stats


def document_stats(scorers: dict[int, Scorer], ids, token_lists) -> list[dict]:
    """Rows of DOC_STATS_SCHEMA: one per (document, context), documents in the given order, contexts inside."""
    token_lists = [list(t) for t in token_lists]
    per_context = {c: scorer.score(token_lists) for c, scorer in scorers.items()}
    rows = []
    for k, (rid, toks) in enumerate(zip(ids, token_lists)):
        for context, stats in per_context.items():
            st = stats[k]
            p_sum = st.get("p_sum")
            rows.append({"id": rid, "context": context, "token_ids": toks, "lp": st["lp"].tolist(),
                         "lp_max": st["lp_max"].tolist(),
                         "p_sum": None if p_sum is None else np.asarray(p_sum, np.float32).tolist(),
                         "n_windows": st["n_windows"], "error": st["error"]})
    return rows


def document_scorers(lm, model: str, contexts, with_gp: bool, batch_size: int | None = None) -> dict[int, Scorer]:
    """One scorer per context C (stride C − 1), sharing one loaded model."""
    cls = GPScorer if with_gp else Scorer
    return {int(c): cls(lm, model_name=model, context=int(c), stride=int(c) - 1, max_batch_size=batch_size)
            for c in contexts}
