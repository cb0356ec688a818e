"""One forward pass per (windowed) sequence → per-token statistics. Plain PyTorch: no Ray inside, so the same
class runs in a Ray Data actor pool, in a benchmark on a GPU machine without Ray, or in a unit test.

Why it looks like this:
- Hidden states come from the backbone and the LM head is applied to chunks of *predicted positions only*, in
  fp32 for the reduction. The model never materialises a batch × tokens × vocab logits tensor, so peak memory
  stays flat in vocabulary size (`row_chunk_elems` bounds one chunk's logits).
- Sequences longer than `context` are cut into windows of `context` tokens every `stride` tokens; each window
  predicts only the positions the previous one did not, so every token after the first is predicted exactly once.
- Windows are sorted by length and packed into micro-batches under a token budget, padded on the right (no
  position ids needed), so padding stays small. With right padding a causal model's real positions never attend
  to the pads after them, so no attention mask is passed (exact, and SDPA keeps its fused `is_causal` kernels;
  `attention_mask=True` restores the masked call for a model that is not strictly causal).
- `compile=True` wraps the backbone in `torch.compile(dynamic=True)` and pads widths to multiples of
  `pad_multiple` (64), so a few bucketed shapes cover every batch.
- A micro-batch that fails is retried one window at a time; on CUDA out-of-memory it is split in half and the
  token budget is lowered for the rest of the run (`oom_backoffs` counts it), so later batches are packed to what
  fits instead of failing again. A window that still fails marks only its own row with an error; the caller
  quarantines it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from scoring.lm.tokenstats import STAT_FIELDS


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


def assemble(plans: Sequence[list[Window]], results: dict, errors: dict) -> list[dict]:
    """Per sequence: its windows' stats concatenated in order, or its error (a failed window fails the row)."""
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


CPU_BATCH_SIZE, CPU_BATCH_TOKENS = 16, 2048  # the CPU default batch policy (see Scorer)


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


def chunk_stats(z, targets):
    """[rows, vocab] fp32 logits and [rows] target ids → [5, rows] stats in STAT_FIELDS order. Plain ops, for
    torch.compile. μ and σ are the mean and std of log p under p; σ is centred, since E[x²] − E[x]² cancels
    catastrophically in fp32 when σ ≪ |μ|; entropy = −μ."""
    import torch

    logp = torch.log_softmax(z, dim=-1)
    p = logp.exp()
    mu = (p * logp).sum(-1)
    sigma = (p * (logp - mu[:, None]).square()).sum(-1).sqrt()
    return torch.stack([logp.gather(-1, targets[:, None]).squeeze(-1), logp.amax(-1), mu, sigma, -mu])


def chunk_stats_inplace(z, targets):
    """`chunk_stats` for eager mode, reusing buffers in place (z becomes p, log p becomes its deviation), so a
    chunk holds three [rows, vocab] fp32 tensors at most. Sums stay torch's pairwise reductions: a gemv-style dot
    product loses ~1e-4 over a 50k vocabulary in fp32. amax, not max(): no argmax (measured ~5× cheaper on CPU)."""
    import torch

    logp = torch.log_softmax(z, dim=-1)
    p = torch.exp(logp, out=z)  # z (the caller's fresh logits) is not needed any more
    lp = logp.gather(-1, targets[:, None]).squeeze(-1)
    lp_max = logp.amax(-1)
    prod = p * logp
    mu = prod.sum(-1)
    dev = logp.sub_(mu[:, None])
    torch.mul(p, dev, out=prod).mul_(dev)
    return torch.stack([lp, lp_max, mu, prod.sum(-1).sqrt_(), -mu])


assert STAT_FIELDS == ("lp", "lp_max", "mu", "sigma", "entropy"), "chunk_stats returns the stats in this order"


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
        compile: bool = False,
        pad_multiple: int | None = None,
        attention_mask: bool = False,
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
        # Measured (docs/scaling.md): on CPU, up to 16 windows within 2,048 padded tokens per forward pass halve
        # the per-row cost of short passages (2.67 -> 1.27 ms a 54-token passage, 0.7M GPT-2, 2 cores) and still
        # help at ~170 tokens; one long window is its own batch. A part's batches depend only on the part, so a
        # resumed run scores exactly as an uninterrupted one. Against batch 1 the stats differ by float32 rounding
        # (tests/scoring/lm/test_scorer_fastpath.py).
        if on_gpu or max_batch_size:
            self.max_batch_size = int(max_batch_size or 64)
            self.max_batch_tokens = int(max_batch_tokens or self.max_batch_size * self.context)
        else:
            self.max_batch_size = CPU_BATCH_SIZE
            self.max_batch_tokens = int(max_batch_tokens or CPU_BATCH_TOKENS)
        self.row_chunk_elems = int(row_chunk_elems)
        self.backbone = model.base_model
        self._chunk_stats = chunk_stats_inplace
        if compile:
            # dynamic=True: one graph for every (batch, width); widths are bucketed by `pad_multiple` below. The
            # vocabulary reduction is compiled too, which fuses its passes over the [rows, vocab] chunk.
            self.backbone = torch.compile(self.backbone, dynamic=True)
            self._chunk_stats = torch.compile(chunk_stats, dynamic=True)
        self.pad_multiple = int(pad_multiple or (64 if compile else 1))
        self.attention_mask = bool(attention_mask)
        self.lm_head = model.get_output_embeddings()
        self.softcap = getattr(cfg, "final_logit_softcapping", None)
        self.calls = 0  # forward micro-batches run; tests and benchmarks read it
        self.oom_backoffs = 0  # times a CUDA OOM lowered the token budget

    # ---- core -------------------------------------------------------------------------------------------------
    def _reduce(self, hidden, targets):
        """Per-position stats from final hidden states [P, d] and target ids [P], in vocabulary-bounded chunks.

        Logits are reduced in fp32 whatever the model's dtype, `row_chunk_elems // vocab` rows at a time."""
        torch = self.torch
        vocab = self.lm_head.weight.shape[0]
        rows = max(1, self.row_chunk_elems // vocab)
        n = hidden.shape[0]
        out = torch.empty((len(STAT_FIELDS), n), dtype=torch.float32, device=hidden.device)
        for s in range(0, n, rows):
            e = min(n, s + rows)
            z = self.lm_head(hidden[s:e]).float()  # a copy for bf16/fp16 models; fp32 logits are reused as is
            if self.softcap:
                z = torch.tanh(z.div_(self.softcap)).mul_(self.softcap)
            out[:, s:e] = self._chunk_stats(z, targets[s:e])
            del z
        stats = out.cpu().numpy()  # one device-to-host copy for all five stats
        return {k: stats[i] for i, k in enumerate(STAT_FIELDS)}

    def _forward(self, seqs: Sequence[np.ndarray], windows: Sequence[Window]) -> list[dict]:
        torch = self.torch
        width = self._padded(max(w.length for w in windows))
        ids = np.zeros((len(windows), width), dtype=np.int64)  # right padding: pads come after every real token
        rows_b, rows_t, targets = [], [], []
        for b, w in enumerate(windows):
            ids[b, : w.length] = seqs[w.seq][w.begin : w.end]
            n = w.end - w.pred_from
            rows_b.append(np.full(n, b, dtype=np.int64))
            rows_t.append(np.arange(w.pred_from - w.begin - 1, w.end - w.begin - 1))  # position t-1 predicts t
            targets.append(seqs[w.seq][w.pred_from : w.end])
        index = torch.from_numpy(np.stack([np.concatenate(rows_b), np.concatenate(rows_t)])).to(self.device)
        target_ids = torch.from_numpy(np.concatenate(targets).astype(np.int64)).to(self.device)
        ids_t = torch.from_numpy(ids).to(self.device)
        kwargs = {}
        if self.attention_mask:
            mask = np.zeros_like(ids)
            for b, w in enumerate(windows):
                mask[b, : w.length] = 1
            kwargs["attention_mask"] = torch.from_numpy(mask).to(self.device)
        with torch.inference_mode():
            hidden = self.backbone(input_ids=ids_t, use_cache=False, **kwargs)[0]
            sel = hidden[index[0], index[1]]
            del hidden
            stats = self._reduce(sel, target_ids)
        self.calls += 1
        out, at = [], 0
        for w in windows:
            n = w.end - w.pred_from
            out.append({k: v[at : at + n] for k, v in stats.items()})
            at += n
        return out

    def _padded(self, length: int) -> int:
        return -(-length // self.pad_multiple) * self.pad_multiple

    @staticmethod
    def _is_oom(torch, exc: BaseException) -> bool:
        return isinstance(exc, getattr(torch.cuda, "OutOfMemoryError", ())) or "out of memory" in str(exc)

    def _run_batch(self, seqs, batch: list[Window], results: dict, errors: dict) -> None:
        torch = self.torch
        fits = max(1, self.max_batch_tokens // self._padded(max(w.length for w in batch)))
        if len(batch) > fits:  # the budget was lowered by an OOM since this batch was cut
            for i in range(0, len(batch), fits):
                self._run_batch(seqs, batch[i : i + fits], results, errors)
            return
        try:
            for w, st in zip(batch, self._forward(seqs, batch)):
                results[w] = st
        except Exception as exc:  # noqa: BLE001 - any failure is retried smaller, then quarantined per row
            oom = self._is_oom(torch, exc)
            if oom and self.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(batch) == 1:
                errors[batch[0].seq] = f"{type(exc).__name__}: {exc}"[:500]
                return
            half = len(batch) // 2 if oom else 1  # OOM: halve; other errors: isolate the failing window
            if oom:
                # Remember what did not fit: later batches are packed under the lower budget from the start.
                width = self._padded(max(w.length for w in batch))
                self.max_batch_tokens = max(width, min(self.max_batch_tokens, half * width))
                self.oom_backoffs += 1
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
        # Longest first, cut greedily as pack_windows does, but one micro-batch at a time so that a budget lowered
        # by an OOM applies to every later batch.
        order = sorted((w for p in plans for w in p), key=lambda w: -w.length)
        i = 0
        while i < len(order):
            width = self._padded(order[i].length)  # the first (longest) sets the padded width
            n = max(1, min(self.max_batch_size, self.max_batch_tokens // width, len(order) - i))
            self._run_batch(seqs, order[i : i + n], results, errors)
            i += n
        return assemble(plans, results, errors)

    # ---- columnar form for Ray Data / pyarrow ----------------------------------------------------------------
    def __call__(self, batch: dict) -> dict:
        return stats_columns(self, batch, LOCAL_SOURCE)


LOCAL_SOURCE = "local"  # token-stats `lp_source` of rows scored from the weights (scoring/api for served models)


def stats_columns(scorer, batch: dict, source: str) -> dict:
    """The columnar form both scorers share: `batch` (token_ids, first_predicted, maybe error) plus the stats
    columns, n_windows, error (a prior error wins), model and lp_source."""
    token_ids = list(batch["token_ids"])
    firsts = [int(x) for x in batch.get("first_predicted", [1] * len(token_ids))]
    scored = scorer.score(token_ids, firsts)
    out = {k: list(v) for k, v in batch.items()}
    for k in STAT_FIELDS:
        out[k] = [s[k].tolist() for s in scored]
    out["n_windows"] = [s["n_windows"] for s in scored]
    prior = list(batch.get("error", [None] * len(token_ids)))
    out["error"] = [p or s["error"] for p, s in zip(prior, scored)]
    out["model"] = [scorer.model_name] * len(token_ids)
    out["lp_source"] = [source] * len(token_ids)
    return out


def flops_per_token(model, context: int) -> float:
    """Forward FLOPs per token: 2·params plus attention scores and values (2·2·layers·context·d_model)."""
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    layers = getattr(cfg, "num_hidden_layers", None) or getattr(cfg, "n_layer", 0)
    d = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", 0)
    return 2.0 * n_params + 4.0 * layers * context * d
