"""What the single-pass detectors cost on top of one forward pass, vs the research-code way of running them.

Tidemark: tokenise once, one scorer pass (the device's default policy), the token-stats table, then every
detector reads it. `loss` alone vs all seven single-pass detectors (loss, zlib, min_k, min_k_pp, max_k, tag_tab,
dc_pdd) share everything but the detector functions, so their ratio is what the extra detectors cost (target
≤ 1.3×). The research-style reference runs one batch-1 forward pass with a full log_softmax per metric (the
per-paper scripts each score the texts themselves), computing only what that metric needs. Both sides are warmed
up first (imports, word-frequency tables, allocator). Every research-style score is checked against Tidemark's.
"""
from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from bench.baselines import reference_loop

SINGLE_PASS = ("loss", "zlib", "min_k", "min_k_pp", "max_k", "tag_tab", "dc_pdd")


def _records(ids, offsets, texts, stats) -> list[dict]:
    return [{"id": str(i), "token_ids": t, "offsets": o, "text": x, "first_predicted": 1, **s}
            for i, (t, o, x, s) in enumerate(zip(ids, offsets, texts, stats))]


def bench_detectors(model_dir: str, texts: Sequence[str], *, log: Callable[[str], None] = print) -> dict:
    import torch

    from scoring.detectors import parse_methods
    from scoring.detectors.dc_pdd import TOKEN_FREQ, count_tokens
    from scoring.lm.model import load_causal_lm
    from scoring.lm.scorer import Scorer
    from scoring.lm.tokenstats import TokenStats

    model, tok = load_causal_lm(model_dir, device="cpu")
    vocab = len(tok)
    methods = {m.name: m for m in parse_methods(",".join(SINGLE_PASS))}
    texts = list(texts)

    def tokenize(xs):
        enc = tok(list(xs), return_offsets_mapping=True)
        return enc["input_ids"], [[int(a) for a, _ in o] for o in enc["offset_mapping"]]

    def run_metrics(names, stats_rows, ids, offsets, xs) -> tuple[dict, dict]:
        """Build the token-stats view and run detectors; returns per-step seconds and the scores."""
        t0 = time.perf_counter()
        view = TokenStats.from_records(_records(ids, offsets, xs, stats_rows))
        secs = {"token_stats": time.perf_counter() - t0}
        views: dict = {}
        scores = {}
        for name in names:
            t0 = time.perf_counter()
            if name == "dc_pdd" and TOKEN_FREQ not in views:
                views[TOKEN_FREQ] = count_tokens(ids, vocab)  # the frequency table is part of DC-PDD's cost
            scores[name] = methods[name](view, views)
            secs[name] = time.perf_counter() - t0
        return secs, scores

    scorer = Scorer(model)
    # Warm-up on a few texts: imports, wordfreq tables, spaCy probing, allocator growth.
    w_ids, w_off = tokenize(texts[:4])
    run_metrics(SINGLE_PASS, scorer.score(w_ids), w_ids, w_off, texts[:4])
    reference_loop(model, w_ids, stats="all")

    t0 = time.perf_counter()
    ids, offsets = tokenize(texts)
    t_tok = time.perf_counter() - t0
    n_tokens = int(sum(len(x) for x in ids))
    t0 = time.perf_counter()
    stats = scorer.score(ids)
    t_fwd = time.perf_counter() - t0
    stats = [{k: s[k] for k in ("lp", "lp_max", "mu", "sigma", "entropy")} for s in stats]
    secs, tm_scores = run_metrics(SINGLE_PASS, stats, ids, offsets, texts)
    shared = t_tok + t_fwd + secs["token_stats"]
    tidemark_loss = shared + secs["loss"]
    tidemark_all = shared + sum(secs[m] for m in SINGLE_PASS)
    log(f"  detectors: tidemark loss {tidemark_loss:.2f} s, all seven {tidemark_all:.2f} s "
        f"(forward {t_fwd:.2f} s, detectors {sum(secs[m] for m in SINGLE_PASS):.2f} s)")

    research = {}
    diffs = {}
    for name in SINGLE_PASS:
        t0 = time.perf_counter()
        r_ids, r_off = tokenize(texts)
        r_stats = reference_loop(model, r_ids, stats="all" if name == "min_k_pp" else "lp")
        t_r_fwd = time.perf_counter() - t0
        r_secs, r_scores = run_metrics([name], [_fill(s) for s in r_stats], r_ids, r_off, texts)
        research[name] = {"forward_s": round(t_r_fwd, 4), "metric_s": round(r_secs[name] + r_secs["token_stats"], 4),
                          "total_s": round(t_r_fwd + r_secs[name] + r_secs["token_stats"], 4)}
        a, b = np.asarray(tm_scores[name], float), np.asarray(r_scores[name], float)
        ok = np.isfinite(a) & np.isfinite(b)
        diffs[name] = float(np.max(np.abs(a[ok] - b[ok]))) if ok.any() else None
    research_all = sum(r["total_s"] for r in research.values())
    log(f"  detectors: research-style loss {research['loss']['total_s']:.2f} s, seven metrics {research_all:.2f} s")
    grad = gradnorm_cost(model, ids, tidemark_loss, scorer)
    log(f"  detectors: gradnorm {grad['seconds']:.2f} s ({grad['ratio_vs_loss']:.1f}x loss alone)")
    return {
        "gradnorm": grad,
        "model": str(model_dir), "params": int(sum(p.numel() for p in model.parameters())), "texts": len(texts),
        "tokens": n_tokens, "torch_threads": torch.get_num_threads(), "scorer_batch_size": scorer.max_batch_size,
        "detectors": list(SINGLE_PASS),
        "tidemark": {"tokenize_s": round(t_tok, 4), "forward_s": round(t_fwd, 4),
                     "token_stats_s": round(secs["token_stats"], 4),
                     "detector_s": {m: round(secs[m], 4) for m in SINGLE_PASS},
                     "loss_only_s": round(tidemark_loss, 4), "all_s": round(tidemark_all, 4)},
        "research_style": {"per_metric": research, "loss_only_s": research["loss"]["total_s"],
                           "all_s": round(research_all, 4)},
        "ratio_all_vs_loss_tidemark": round(tidemark_all / tidemark_loss, 3),
        "ratio_all_vs_loss_research_style": round(research_all / research["loss"]["total_s"], 3),
        "speedup_all_tidemark_vs_research_style": round(research_all / tidemark_all, 3),
        "target_ratio_all_vs_loss": 1.3,
        "max_abs_score_diff_research_vs_tidemark": diffs,
    }


def _fill(stats: dict) -> dict:
    """A research script that computes only log p leaves the other stats empty."""
    n = len(stats["lp"])
    return {k: stats.get(k, np.full(n, np.nan, np.float32)) for k in ("lp", "lp_max", "mu", "sigma", "entropy")}


def gradnorm_cost(model, ids, loss_seconds: float, scorer) -> dict:
    """GradNorm's gradient view on the same texts (scoring/lm/gradnorm.py): one forward and one backward per text,
    against `loss` alone (tokenise, one batched scoring pass, the detector)."""
    from scoring.lm.gradnorm import GradNorms

    grads = GradNorms(model, context=scorer.context, stride=scorer.stride)
    grads(ids[:2])  # warm-up: autograd's first use
    t0 = time.perf_counter()
    grads(ids)
    seconds = time.perf_counter() - t0
    return {"texts": len(ids), "seconds": round(seconds, 4), "seconds_per_1000_texts": round(1000 * seconds / len(ids), 2),
            "passes_per_text": "1 forward + 1 backward (one text at a time)", "loss_only_s": round(loss_seconds, 4),
            "ratio_vs_loss": round(seconds / loss_seconds, 2),
            "loss_passes_per_text": f"1 forward in batches of up to {scorer.max_batch_size}"}
