"""What Tidemark is compared with, written the way research code scores texts.

- `reference_loop`: one text at a time (batch 1), a full Hugging Face forward (`model(ids).logits`), then a full
  log_softmax over the T×V logits, as the Min-K% / Min-K%++ reference implementations do. `stats="all"` computes
  the five token stats Tidemark stores (softmax, μ and σ over the vocabulary as Min-K%++'s code does, with σ
  centred as Tidemark's is so the two agree in fp32); `stats="lp"` only log p of the true token, which is all a
  LOSS / Min-K% / zlib script computes.
- `naive_padded`: batches of `batch_size` texts in arrival order (no length sorting), padded on the right to the
  longest text of the batch, attention mask on, full logits for the whole B×T×V block.
- `reference_windowed`: the sliding-window loop of the Hugging Face perplexity guide for texts longer than the
  context: windows every `stride` tokens, each scoring only the targets the previous window did not.

They return the same per-text dicts as `Scorer.score` (float32 arrays aligned with token_ids[1:]).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np


def _stats_from_logits(torch, logits, targets, stats: str) -> dict:
    """Research-style stats from full logits [T, V] (any dtype) and targets [T]."""
    logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    out = {"lp": logp.gather(-1, targets[:, None]).squeeze(-1)}
    if stats == "all":
        probs = torch.softmax(logits, dim=-1)
        mu = (probs * logp).sum(-1)
        out["lp_max"] = logp.max(-1).values
        out["mu"] = mu
        out["sigma"] = (probs * (logp - mu[:, None]).square()).sum(-1).sqrt()
        out["entropy"] = -(probs * logp).sum(-1)
    return {k: v.cpu().numpy().astype(np.float32) for k, v in out.items()}


def reference_one(model, ids: Sequence[int], stats: str = "all") -> dict:
    import torch

    device = next(model.parameters()).device
    x = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=device)[None]
    with torch.no_grad():
        logits = model(input_ids=x).logits[0, :-1]
        return _stats_from_logits(torch, logits, x[0, 1:], stats)


def reference_loop(model, seqs: Sequence[Sequence[int]], stats: str = "all") -> list[dict]:
    return [reference_one(model, ids, stats) for ids in seqs]


def naive_padded(model, seqs: Sequence[Sequence[int]], batch_size: int, stats: str = "all") -> list[dict]:
    import torch

    device = next(model.parameters()).device
    out = []
    for s in range(0, len(seqs), batch_size):
        batch = [np.asarray(x, dtype=np.int64) for x in seqs[s : s + batch_size]]
        width = max(len(x) for x in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for b, x in enumerate(batch):
            ids[b, : len(x)] = torch.from_numpy(x)
            mask[b, : len(x)] = 1
        ids, mask = ids.to(device), mask.to(device)
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits  # B × T × V
            full = _stats_from_logits(torch, logits[:, :-1].reshape(-1, logits.shape[-1]),
                                      ids[:, 1:].reshape(-1), stats)
        for b, x in enumerate(batch):
            row = slice(b * (width - 1), b * (width - 1) + len(x) - 1)
            out.append({k: v[row] for k, v in full.items()})
    return out


def reference_windowed(model, ids: Sequence[int], context: int, stride: int, stats: str = "all") -> dict:
    """The HF perplexity guide's strided loop: window [begin, begin+context) every `stride` tokens; each window
    scores the targets after the previous window's end."""
    import torch

    device = next(model.parameters()).device
    ids = np.asarray(ids, dtype=np.int64)
    parts, prev_end = [], 1  # position 0 is never predicted
    for begin in range(0, len(ids), stride):
        end = min(begin + context, len(ids))
        if end > prev_end:
            x = torch.as_tensor(ids[begin:end], device=device)[None]
            with torch.no_grad():
                logits = model(input_ids=x).logits[0, :-1]
            keep = slice(prev_end - begin - 1, end - begin - 1)  # hidden state t-1 predicts token t
            parts.append(_stats_from_logits(torch, logits[keep], x[0, 1:][keep], stats))
            prev_end = end
        if end == len(ids):
            break
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
