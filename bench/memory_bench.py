"""Peak memory of scoring vs batch × length, and its flatness in vocabulary size.

Tidemark applies the LM head to `row_chunk_elems // vocab` predicted positions at a time, so its extra memory is
bounded by a few [rows, vocab] fp32 buffers whatever the vocabulary, while the naive path materialises the whole
B×T×V logits block (and its log_softmax and softmax). Measured:
- on CPU with the torch profiler's allocator events (`profile_memory=True`): the peak of live tensor bytes
  allocated during the call, and the largest single allocation, which shows directly whether a B×T×V fp32 tensor
  ever existed;
- on CUDA with torch.cuda.max_memory_allocated() above what was allocated before the call.
Weights exist before the call and are not counted. No Ray.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import sys
from typing import Callable, Sequence

from bench.baselines import naive_padded
from bench.common import random_sequences


@contextlib.contextmanager
def _quiet_fd2():
    """Kineto prints a line to fd 2 at every profiler start/stop; mute fd 2 while profiling (exceptions still
    propagate and are printed after it is restored)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_cpu(fn: Callable[[], object]) -> dict:
    from torch.profiler import ProfilerActivity, profile

    with _quiet_fd2(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and "CPU" in str(e.device_type()))
    live = peak = largest = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
        largest = max(largest, nbytes)
    return {"peak_bytes": int(peak), "largest_alloc_bytes": int(largest), "how": "torch.profiler allocator events"}


def peak_cuda(fn: Callable[[], object], device: str) -> dict:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    base = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return {"peak_bytes": int(torch.cuda.max_memory_allocated(device) - base), "largest_alloc_bytes": None,
            "how": "torch.cuda.max_memory_allocated - memory_allocated before the call"}


def measure(fn: Callable[[], object], device: str) -> dict:
    return peak_cuda(fn, device) if str(device).startswith("cuda") else peak_cpu(fn)


def bench_memory_grid(model, *, model_name: str, device: str = "cpu",
                      grid: Sequence[tuple[int, int]] = ((1, 128), (4, 512), (8, 512)),
                      naive_limit_bytes: float = 1.5e9, seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """Peak memory of one forward micro-batch of B windows × T tokens: Tidemark vs the naive full-logits path."""
    from scoring.lm.scorer import Scorer

    vocab = int(model.get_output_embeddings().weight.shape[0])
    rows = []
    for b, t in grid:
        seqs = random_sequences([t] * b, vocab, seed=seed)
        scorer = Scorer(model, max_batch_size=b, max_batch_tokens=b * t)
        scorer.score(seqs[:1])  # warm-up outside the measurement
        tm = measure(lambda: scorer.score(seqs), device)
        btv = b * t * vocab * 4
        row = {"batch": b, "length": t, "vocab": vocab, "btv_fp32_bytes": btv, "tidemark": tm,
               "row_chunk_elems": scorer.row_chunk_elems}
        if tm["largest_alloc_bytes"] is not None:
            row["tidemark_has_btv_fp32_tensor"] = tm["largest_alloc_bytes"] >= btv
        if btv <= naive_limit_bytes:
            row["naive_padded"] = measure(lambda: naive_padded(model, seqs, b), device)
        else:
            row["naive_padded"] = {"skipped": f"would materialise {btv / 1e9:.1f} GB of fp32 logits"}
        rows.append(row)
        naive = row["naive_padded"]
        naive_text = f"{naive['peak_bytes'] / 1e6:.1f} MB" if "peak_bytes" in naive else "skipped"
        log(f"  memory {model_name} B={b} T={t} V={vocab}: tidemark peak {tm['peak_bytes'] / 1e6:.1f} MB, "
            f"naive {naive_text}, B×T×V fp32 {btv / 1e6:.1f} MB")
    return {"model": model_name, "vocab": vocab, "device": device, "rows": rows}


def bench_vocab_flatness(*, device: str = "cpu", dtype=None, vocabs: Sequence[int] = (2000, 32000, 128000),
                         grid: Sequence[tuple[int, int]] = ((1, 128), (4, 512), (8, 512)), n_layer: int = 2,
                         n_embd: int = 128, naive_limit_bytes: float = 1.5e9,
                         log: Callable[[str], None] = print) -> dict:
    """The same small backbone with growing vocabularies: Tidemark's peak must stop growing with V once B·T·V
    exceeds one reduction chunk, while the naive path grows as B·T·V."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    out = []
    for vocab in vocabs:
        torch.manual_seed(0)
        with torch.device(device):
            model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=max(t for _, t in grid), n_embd=n_embd,
                                               n_layer=n_layer, n_head=4, bos_token_id=0, eos_token_id=0))
        model = model.to(dtype or torch.float32).eval()
        out.append(bench_memory_grid(model, model_name=f"gpt2-{n_layer}x{n_embd}-V{vocab}", device=device, grid=grid,
                                     naive_limit_bytes=naive_limit_bytes, log=log))
        del model
    flat = []
    for i, (b, t) in enumerate(grid):
        by_vocab = {m["vocab"]: m["rows"][i] for m in out}
        peaks = {v: r["tidemark"]["peak_bytes"] for v, r in by_vocab.items()}
        naive = {v: r["naive_padded"].get("peak_bytes") for v, r in by_vocab.items()}
        # Once one reduction chunk no longer holds all B·(T-1) predicted rows, the peak must stop following V.
        chunked = [v for v, r in by_vocab.items() if b * (t - 1) * v > r["row_chunk_elems"]]
        rec = {"batch": b, "length": t, "tidemark_peak_bytes_by_vocab": peaks, "naive_peak_bytes_by_vocab": naive,
               "vocabs_past_one_chunk": chunked}
        if len(chunked) >= 2:
            rec["tidemark_peak_growth_over_those_vocabs"] = round(peaks[max(chunked)] / max(1, peaks[min(chunked)]), 3)
            rec["vocab_growth"] = round(max(chunked) / min(chunked), 2)
        flat.append(rec)
    no_btv = [r.get("tidemark_has_btv_fp32_tensor") for m in out for r in m["rows"]]
    return {"vocabs": list(vocabs), "grid": [list(g) for g in grid], "models": out, "flatness": flat,
            "tidemark_never_allocated_btv_fp32": None if None in no_btv else not any(no_btv)}


def grid_product(batches: Sequence[int], lengths: Sequence[int]) -> list[tuple[int, int]]:
    return list(itertools.product(batches, lengths))
