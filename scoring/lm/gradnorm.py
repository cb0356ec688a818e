"""The gradient view (GradNorm, as MIMIR computes it: mimir/attacks/gradnorm.py, after Pandora's White-Box,
arXiv 2402.17012): per text, the mean loss over its tokens is back-propagated through the target model and each
parameter tensor's gradient is reduced to its p-norm, for p = inf, 1 and 2 at once (one backward serves all
three). The `gradnorm` detector averages the norms over tensors and negates them (a smaller gradient = member).

- The loss is MIMIR's: the mean negative log-likelihood of tokens 1..N-1 (the LOSS detector's tokens). A text
  longer than the context is cut into the scorer's windows (every token predicted once) and each window's share
  of the loss is back-propagated in turn, so the gradients add up to those of the whole text's mean loss without
  holding every window's graph at once.
- Every parameter that receives a gradient counts, embeddings and the LM head included; tied weights once
  (`model.parameters()` lists a shared tensor once).
- Gradients are float32: where the scorer runs a bf16/fp16 model (a GPU), the view uses a float32 copy of it, and
  every norm is taken in float32 (a bf16 p=1 sum overflows).
- One backward per text: a batch's backward adds its texts' gradients together. Per-sample gradients of a batch
  (torch.func.vmap over functional_call) hold batch × parameters floats and were not faster on CPU: 0.22 s against
  0.18 s for this loop, 16 texts of 128 tokens on a 2-layer GPT-2 (measured 2026-11-26); no GPU was lent to measure
  them there.
- A text with no predicted token, or whose gradient is not finite, is an error for its row (quarantined).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from scoring.lm.scorer import plan_windows

ORDERS = ("inf", "1", "2")  # the layout of a row's `grad_norms`: the inf-norms of every tensor, then 1, then 2


def split_norms(flat: np.ndarray, p: str) -> np.ndarray:
    """The per-tensor norms for p (a row's `grad_norms` holds all three orders, ORDERS, one after the other)."""
    if p not in ORDERS:
        raise ValueError(f"gradnorm p must be one of {', '.join(ORDERS)}; got {p!r}")
    per = len(flat) // len(ORDERS)
    i = ORDERS.index(p)
    return np.asarray(flat[i * per:(i + 1) * per], dtype=np.float64)


class GradNorms:
    """`grad_norms(token_ids)` → per text (norms as float32 [3 × tensors], None) or (None, error)."""

    def __init__(self, model, *, context: int, stride: int | None = None):
        import copy

        import torch

        self.torch = torch
        fp32 = next(model.parameters()).dtype == torch.float32
        self.model = model if fp32 else copy.deepcopy(model).float()
        self.context, self.stride = int(context), int(stride or max(1, int(context) // 2))
        self.device = next(self.model.parameters()).device
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.backwards = 0  # texts back-propagated (the bench reads it)

    def one(self, ids: Sequence[int]) -> np.ndarray:
        torch = self.torch
        seq = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self.device)
        windows = plan_windows(len(seq), 1, self.context, self.stride)
        if not windows:
            raise ValueError("too_few_tokens: nothing to predict")
        n = sum(w.end - w.pred_from for w in windows)
        for p in self.params:
            p.grad = None
        with torch.enable_grad():
            for w in windows:
                logits = self.model(input_ids=seq[w.begin:w.end][None], use_cache=False).logits[0].float()
                pred = logits[w.pred_from - w.begin - 1: w.end - w.begin - 1]
                lp = torch.log_softmax(pred, dim=-1).gather(-1, seq[w.pred_from:w.end, None]).squeeze(-1)
                (-lp.sum() / n).backward()
        grads = [p.grad.float().flatten() for p in self.params if p.grad is not None]
        norms = torch.stack([torch.stack([torch.linalg.vector_norm(g, ord=o) for g in grads])
                             for o in (float("inf"), 1.0, 2.0)]).flatten()
        for p in self.params:
            p.grad = None
        self.backwards += 1
        out = norms.detach().cpu().numpy().astype(np.float32)
        if not np.isfinite(out).all():
            raise ValueError("gradient_not_finite: a gradient norm is not finite")
        return out

    def __call__(self, token_ids: Sequence[Sequence[int]]) -> list[tuple[np.ndarray | None, str | None]]:
        out = []
        for ids in token_ids:
            try:
                out.append((self.one(ids), None))
            except Exception as exc:  # noqa: BLE001 - the row is quarantined with its reason, the part goes on
                msg = str(exc) if str(exc).split(":")[0] in ("too_few_tokens", "gradient_not_finite") else \
                    f"{type(exc).__name__}: {exc}"
                out.append((None, msg[:500]))
        return out
