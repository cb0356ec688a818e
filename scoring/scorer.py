"""One forward pass per (windowed) sequence → per-token statistics. Plain PyTorch: no Ray inside, so the same
class runs in a Ray Data actor pool, in a benchmark on a GPU machine without Ray, or in a unit test.

Why it looks like this:
- Hidden states come from the backbone and the LM head is applied to chunks of *predicted positions only*, in
  fp32 for the reduction. The model never materialises a batch × tokens × vocab logits tensor, so peak memory
  stays flat in vocabulary size (`row_chunk_elems` bounds one chunk's logits).
- Sequences longer than `context` are cut into windows of `context` tokens every `stride` tokens; each window
  predicts only the positions the previous one did not, so every token after the first is predicted exactly once.
- Windows are sorted by length and packed into micro-batches under a token budget, padded on the right (no
  position ids needed), so padding stays small.
- A micro-batch that fails is retried one window at a time; on CUDA out-of-memory it is split in half. A window
  that still fails marks only its own row with an error; the caller quarantines it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scoring.tokenstats import STAT_FIELDS


@dataclass(frozen=True)
class Window:
    seq: int  # index of the sequence in the call
    begin: int  # first token of the window
    end: int  # one past the last token
    pred_from: int  # first target position predicted by this window (absolute in the sequence)

    @property
    def length(self) -> int:
        return self.end - self.begin


def plan_windows(n_tokens: int, first_predicted: int, context: int, stride: int, seq: int = 0) -> list[Window]:
    """Windows over a sequence of `n_tokens` so that each position in [max(first_predicted,1) .. n) is predicted
    once. Position 0 has nothing before it and is never predicted."""
    if stride < 1 or stride > context - 1:
        raise ValueError(f"stride must be in [1, context-1]; got stride={stride}, context={context}")
    start = max(first_predicted, 1)
    if n_tokens <= start:
        return []
    windows = []
    begin, predicted_to = 0, start
    while True:
        end = min(begin + context, n_tokens)
        if end > predicted_to:
            windows.append(Window(seq, begin, end, predicted_to))
            predicted_to = end
        if end >= n_tokens:
            break
        begin += stride
        # Keep at least one token of context before the first target of the window.
        begin = min(begin, predicted_to - 1)
    return windows


def pack_windows(windows: Sequence[Window], max_batch_tokens: int, max_batch_size: int) -> list[list[Window]]:
    """Sort by length (longest first) and cut into micro-batches whose padded size fits the token budget."""
    order = sorted(windows, key=lambda w: -w.length)
    batches, cur = [], []
    for w in order:
        width = cur[0].length if cur else w.length  # the first (longest) sets the padded width
        if cur and ((len(cur) + 1) * width > max_batch_tokens or len(cur) >= max_batch_size):
            batches.append(cur)
            cur = []
        cur.append(w)
    if cur:
        batches.append(cur)
    return batches


class Scorer:
    """Callable over a batch of token sequences: `scorer(token_ids, first_predicted) -> list[stats dict]`.

    `batch(dict)` is the Ray Data–friendly form: it takes a columnar batch with `token_ids` and
    `first_predicted` and returns the same batch with the stats columns, `n_windows` and `error` added.
    """

    def __init__(
        self,
        model,
        *,
        model_name: str = "model",
        context: int | None = None,
        stride: int | None = None,
        max_batch_tokens: int | None = None,
        max_batch_size: int | None = None,
        row_chunk_elems: int = 1 << 24,
    ):
        import torch

        self.torch = torch
        self.model = model
        self.model_name = model_name
        self.device = next(model.parameters()).device
        cfg = model.config
        max_pos = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 2048
        self.context = int(context or min(max_pos, 2048))
        self.stride = int(stride or max(1, self.context // 2))
        on_gpu = self.device.type == "cuda"
        # Measured (bench/): on a 2-core CPU batching does not beat batch 1, so CPU defaults to single windows.
        self.max_batch_size = int(max_batch_size or (64 if on_gpu else 1))
        self.max_batch_tokens = int(max_batch_tokens or (self.max_batch_size * self.context if on_gpu else self.context))
        self.row_chunk_elems = int(row_chunk_elems)
        self.backbone = model.base_model
        self.lm_head = model.get_output_embeddings()
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.calls = 0  # forward micro-batches run; tests and benchmarks read it

    # ---- core -------------------------------------------------------------------------------------------------
    def _reduce(self, hidden, targets):
        """Per-position stats from final hidden states [P, d] and target ids [P], in vocabulary-bounded chunks."""
        torch = self.torch
        vocab = self.lm_head.weight.shape[0]
        rows = max(1, self.row_chunk_elems // vocab)
        out = {k: [] for k in STAT_FIELDS}
        for s in range(0, hidden.shape[0], rows):
            logits = self.lm_head(hidden[s : s + rows]).float()
            if self.softcap:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            logp = torch.log_softmax(logits, dim=-1)
            del logits
            p = logp.exp()
            mu = (p * logp).sum(-1)
            second = (p * logp.square()).sum(-1)
            out["lp"].append(logp.gather(-1, targets[s : s + rows, None]).squeeze(-1))
            out["lp_max"].append(logp.max(-1).values)
            out["mu"].append(mu)
            out["sigma"].append((second - mu.square()).clamp_min(0).sqrt())
            out["entropy"].append(-mu)
        return {k: torch.cat(v).cpu().numpy().astype(np.float32) for k, v in out.items()}

    def _forward(self, seqs: Sequence[np.ndarray], windows: Sequence[Window]) -> list[dict]:
        torch = self.torch
        width = max(w.length for w in windows)
        ids = torch.zeros((len(windows), width), dtype=torch.long)
        mask = torch.zeros((len(windows), width), dtype=torch.long)
        rows_b, rows_t, targets = [], [], []
        for b, w in enumerate(windows):
            chunk = torch.as_tensor(seqs[w.seq][w.begin : w.end], dtype=torch.long)
            ids[b, : w.length] = chunk
            mask[b, : w.length] = 1
            pos = torch.arange(w.pred_from, w.end)  # absolute target positions
            rows_b.append(torch.full_like(pos, b))
            rows_t.append(pos - w.begin - 1)  # the hidden state that predicts position t sits at t-1
            targets.append(torch.as_tensor(seqs[w.seq][w.pred_from : w.end], dtype=torch.long))
        ids, mask = ids.to(self.device), mask.to(self.device)
        with torch.inference_mode():
            hidden = self.backbone(input_ids=ids, attention_mask=mask, use_cache=False)[0]
            sel = hidden[torch.cat(rows_b).to(self.device), torch.cat(rows_t).to(self.device)]
            stats = self._reduce(sel, torch.cat(targets).to(self.device))
        self.calls += 1
        out, at = [], 0
        for w in windows:
            n = w.end - w.pred_from
            out.append({k: v[at : at + n] for k, v in stats.items()})
            at += n
        return out

    def _run_batch(self, seqs, batch: list[Window], results: dict, errors: dict) -> None:
        torch = self.torch
        try:
            for w, st in zip(batch, self._forward(seqs, batch)):
                results[w] = st
        except Exception as exc:  # noqa: BLE001 - any failure is retried smaller, then quarantined per row
            oom = isinstance(exc, getattr(torch.cuda, "OutOfMemoryError", ())) or "out of memory" in str(exc)
            if oom and self.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(batch) == 1:
                errors[batch[0].seq] = f"{type(exc).__name__}: {exc}"[:500]
                return
            half = len(batch) // 2 if oom else 1  # OOM: halve; other errors: isolate the failing window
            parts = [batch[:half], batch[half:]] if oom else [[w] for w in batch]
            for part in parts:
                self._run_batch(seqs, part, results, errors)

    def score(self, token_ids: Sequence[Sequence[int]], first_predicted: Sequence[int] | None = None) -> list[dict]:
        """Stats for each sequence: dict of float32 arrays (len = n_tokens - first_predicted), n_windows, error."""
        seqs = [np.asarray(t, dtype=np.int64) for t in token_ids]
        firsts = list(first_predicted) if first_predicted is not None else [1] * len(seqs)
        plans = [plan_windows(len(s), f, self.context, self.stride, i) for i, (s, f) in enumerate(zip(seqs, firsts))]
        results: dict[Window, dict] = {}
        errors: dict[int, str] = {}
        for batch in pack_windows([w for p in plans for w in p], self.max_batch_tokens, self.max_batch_size):
            self._run_batch(seqs, batch, results, errors)
        out = []
        for i, plan in enumerate(plans):
            if i in errors:
                out.append({**{k: np.zeros(0, np.float32) for k in STAT_FIELDS}, "n_windows": 0, "error": errors[i]})
            elif not plan:
                out.append({**{k: np.zeros(0, np.float32) for k in STAT_FIELDS}, "n_windows": 0,
                            "error": "too_few_tokens: nothing to predict"})
            else:
                merged = {k: np.concatenate([results[w][k] for w in plan]) for k in STAT_FIELDS}
                out.append({**merged, "n_windows": len(plan), "error": None})
        return out

    # ---- columnar form for Ray Data / pyarrow ----------------------------------------------------------------
    def __call__(self, batch: dict) -> dict:
        token_ids = list(batch["token_ids"])
        firsts = [int(x) for x in batch.get("first_predicted", [1] * len(token_ids))]
        scored = self.score(token_ids, firsts)
        out = {k: list(v) for k, v in batch.items()}
        for k in STAT_FIELDS:
            out[k] = [s[k].tolist() for s in scored]
        out["n_windows"] = [s["n_windows"] for s in scored]
        prior = list(batch.get("error", [None] * len(token_ids)))
        out["error"] = [p or s["error"] for p, s in zip(prior, scored)]
        out["model"] = [self.model_name] * len(token_ids)
        return out


def flops_per_token(model, context: int) -> float:
    """Forward FLOPs per token: 2·params plus attention scores and values (2·2·layers·context·d_model)."""
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", 0)
    d = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 0)
    return 2.0 * n_params + 4.0 * layers * context * d
