"""Scorer throughput, side by side in one run: Tidemark's scorer vs (a) the research-style batch-1 loop with a
full log_softmax and (b) naive padded batching without length sorting, over fixed lengths and a realistic
mixed-length set. No Ray: bench/gpu.py runs this on a GPU machine as is.

Every method scores the same token ids. Tokens/s counts input tokens. Per cell, the best of `repeats` runs is
kept (methods are interleaved run by run so that load drifting on a shared machine hits them alike) and every run
is recorded. Each method's stats are checked against the reference loop on the cell's first sequence.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from bench.baselines import naive_padded, reference_loop
from bench.common import dtype_name, mixed_lengths, random_sequences, timed
from bench.flops import flop_counts, forward_flops, mfu


def padded_tokens(lengths: Sequence[int], batch: int, sort: bool, budget: int | None = None) -> int:
    """Tokens a batching scheme pushes through the model, pads included (for the padding-waste column):
    arrival order (naive) or longest-first under a token budget (Tidemark)."""
    order = sorted(lengths, reverse=True) if sort else list(lengths)
    total, i = 0, 0
    while i < len(order):
        n = min(batch, len(order) - i)
        if sort:
            width = order[i]
            if budget:
                n = max(1, min(n, budget // width))
        else:
            width = max(order[i : i + n])
        total += n * width
        i += n
    return total


def make_methods(model, device: str, batch: int, *, naive_batch: int | None = None, compile_: bool = False,
                 include_bucketed: bool = True, scorer_kwargs: dict | None = None) -> dict[str, dict]:
    """name → {"run": callable(seqs) -> list[stats], "batch_size", "scorer" (Tidemark's, for .calls)}."""
    from scoring.lm.scorer import Scorer

    naive_batch = naive_batch or batch
    methods: dict[str, dict] = {
        "reference_b1": {"run": lambda seqs: reference_loop(model, seqs), "batch_size": 1},
        f"naive_padded_b{naive_batch}": {"run": lambda seqs: naive_padded(model, seqs, naive_batch),
                                         "batch_size": naive_batch},
    }
    default = Scorer(model, **(scorer_kwargs or {}))
    methods["tidemark"] = {"run": default.score, "batch_size": default.max_batch_size, "scorer": default,
                           "note": "device default policy"}
    if include_bucketed and default.max_batch_size != batch:
        bucketed = Scorer(model, max_batch_size=batch, **(scorer_kwargs or {}))
        methods[f"tidemark_bucketed_b{batch}"] = {"run": bucketed.score, "batch_size": batch, "scorer": bucketed}
    if compile_:
        compiled = Scorer(model, compile=True, **(scorer_kwargs or {}))
        methods["tidemark_compiled"] = {"run": compiled.score, "batch_size": compiled.max_batch_size,
                                        "scorer": compiled, "note": "torch.compile, widths padded to 64"}
    return methods


def _prefix_with_tokens(seqs: list, tokens: int | None) -> list:
    if not tokens:
        return seqs
    out, total = [], 0
    for s in seqs:
        out.append(s)
        total += len(s)
        if total >= tokens:
            break
    return out


def _max_diff(a: dict, b: dict) -> float:
    return float(max(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64))) for k in a
                     if k in b and len(a[k])))


def bench_throughput(model, *, model_name: str, device: str = "cpu", lengths: Sequence[int] = (32, 128, 512, 2048),
                     mixed: bool = True, tokens: int = 16384, method_tokens: dict[str, int] | None = None,
                     batch: int = 16, naive_batch: int | None = None, repeats: int = 1, warmup: str = "once",
                     compile_: bool = False,
                     peak: float | None = None, seed: int = 0, log: Callable[[str], None] = print) -> dict:
    """Tokens/s per (cell, method). `method_tokens` caps the tokens a slow method scores per cell (a prefix of the
    same sequences); tokens/s stays comparable. `peak` (FLOP/s) turns achieved FLOP/s into MFU."""
    vocab = model.get_output_embeddings().weight.shape[0]
    counts = flop_counts(model)
    methods = make_methods(model, device, batch, naive_batch=naive_batch, compile_=compile_)
    method_tokens = method_tokens or {}
    cells = [(str(n), [int(n)] * max(1, tokens // int(n))) for n in lengths]
    if mixed:
        cells.append(("mixed", mixed_lengths(tokens, seed=seed)))
    warmed: set[str] = set()
    results = []
    for c, (cell, cell_lengths) in enumerate(cells):
        seqs = random_sequences(cell_lengths, vocab, seed=seed + c)
        runs: dict[str, list[float]] = {m: [] for m in methods}
        outputs: dict[str, dict] = {}
        errors: dict[str, str] = {}
        for name, m in methods.items():  # warm-up: first calls pay for allocator growth, kernels, compilation
            if warmup == "cell" or name not in warmed:
                try:
                    m["run"](seqs[: max(1, min(len(seqs), m["batch_size"]))])
                except Exception as exc:  # noqa: BLE001
                    errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    _free(device)
                warmed.add(name)
        for _ in range(max(1, repeats)):
            for name, m in methods.items():
                if name in errors:
                    continue
                subset = _prefix_with_tokens(seqs, method_tokens.get(name))
                calls0 = m["scorer"].calls if "scorer" in m else None
                try:
                    seconds, out = timed(lambda: m["run"](subset), device)
                except Exception as exc:  # noqa: BLE001 - e.g. the naive path's B×T×V logits do not fit
                    errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    _free(device)
                    continue
                runs[name].append(seconds)
                outputs[name] = {"first": out[0], "n": len(subset), "tokens": int(sum(len(s) for s in subset)),
                                 "forwards": None if calls0 is None else m["scorer"].calls - calls0,
                                 "lengths": [len(s) for s in subset]}
        if "reference_b1" in errors:
            raise RuntimeError(f"the reference loop failed: {errors['reference_b1']}")
        ref = outputs["reference_b1"]["first"]
        cell_out = {"cell": cell, "n_seqs": len(seqs), "tokens": int(sum(cell_lengths)),
                    "length_min": int(min(cell_lengths)), "length_median": float(np.median(cell_lengths)),
                    "length_max": int(max(cell_lengths)), "methods": {}}
        ref_tps = outputs["reference_b1"]["tokens"] / min(runs["reference_b1"])
        for name, m in methods.items():
            if name in errors:
                cell_out["methods"][name] = {"batch_size": m["batch_size"], "error": errors[name]}
                continue
            o, best = outputs[name], min(runs[name])
            flops = forward_flops(counts, o["lengths"])
            rec = {
                "batch_size": m["batch_size"], "seqs": o["n"], "tokens": o["tokens"], "seconds": round(best, 4),
                "seconds_all": [round(x, 4) for x in runs[name]], "tokens_per_s": round(o["tokens"] / best, 1),
                "speedup_vs_reference_b1": round(o["tokens"] / best / ref_tps, 3),
                "achieved_tflops": round(flops / best / 1e12, 4),
                "mfu": None if mfu(flops, best, peak) is None else round(mfu(flops, best, peak), 4),
                "max_abs_diff_vs_reference_first_seq": _max_diff(o["first"], ref),
            }
            if o["forwards"] is not None:
                rec["forward_calls"] = o["forwards"]
            if name.startswith("naive_padded"):
                rec["padded_tokens"] = padded_tokens(o["lengths"], m["batch_size"], sort=False)
            elif "scorer" in m:
                sc = m["scorer"]
                rec["padded_tokens"] = padded_tokens(o["lengths"], sc.max_batch_size, sort=True,
                                                     budget=sc.max_batch_tokens)
            if "note" in m:
                rec["note"] = m["note"]
            cell_out["methods"][name] = rec
        results.append(cell_out)
        log(f"  {model_name} {cell:>6}: " + "  ".join(
            f"{n} {r['tokens_per_s']:.0f} tok/s" if "tokens_per_s" in r else f"{n} failed ({r['error'][:40]})"
            for n, r in cell_out["methods"].items()))
    dtype = next(model.parameters()).dtype
    return {"model": model_name, "params": int(sum(p.numel() for p in model.parameters())),
            "vocab": int(vocab), "dtype": dtype_name(dtype), "device": device, "flop_counts": counts,
            "batch": batch, "repeats": repeats, "tokens_per_cell": tokens, "method_tokens": method_tokens,
            "peak_flops": peak, "cells": results}


def _free(device: str) -> None:
    if str(device).startswith("cuda"):
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()
