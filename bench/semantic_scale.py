"""`python -m bench.semantic_scale`: `tidemark overlap --semantic` at the scale issue 57 names, on this machine.

- Time: a corpus of about 1M words (State of the Union text, ~6 MB of jsonl in ~1 MB files, one corpus part each)
  against 1,300 GSM8K-style items (bench/semantic_items.py) and a 500-item null, all-MiniLM-L6-v2, top 100, the
  whole command as a subprocess with its own local Ray (start-up included), once embedding every window and once
  with the first stage (`--prefilter 0.5`). 50 of the items are planted, WordNet-rephrased, in the corpus, so the
  run has something to find (recall on them is reported, not claimed: the study measures recall).
- Driver memory: the same command over 1x and 8x that corpus with the tiny random sentence model
  (scoring/semantic/tiny.py: the plane is the same, the embedding is cheap), peak RSS of the driver and of the
  Ray workers, sampled (bench/scale_jobs.RssSampler).
- Embedding throughput: Tidemark's embedder (scoring/semantic/embed.Embedder, what the actors run) against a plain
  sentence-transformers `encode` loop over the same windows, both on the same torch threads, at encode's best batch
  size among 16-256; and the job's own windows per second (windows / the part loop's seconds) against that.
  sentence-transformers is not a dependency of Tidemark: `make bench-semantic` installs it; without it that
  comparison is recorded as not run.

Results: bench/results/semantic_scale.json and .md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

FILE_WORDS = 170_000  # ~1 MB of jsonl: six parts for 1M words, so both actors stay busy
ITEMS, NULL, PLANTED = 1300, 500, 50
ST_BATCHES = (16, 32, 64, 128, 256)
THROUGHPUT_WINDOWS = 2000


def log(msg: str) -> None:
    print(f"[semantic-scale] {msg}", file=sys.stderr, flush=True)


def write_inputs(root: Path, words: int, seed: int = 0) -> dict:
    """bench.jsonl (ITEMS items), null.jsonl (NULL others) and corpus/ (documents of 8 SOTU passages of 64 words,
    cycled with new ids to `words` words; the first PLANTED items' WordNet rephrases planted in the first documents).
    """
    from bench.semantic_items import generate
    from bench.semantic_rephrase import wordnet_rephrases
    from scoring.studies.known_membership import sotu_passages

    root.mkdir(parents=True, exist_ok=True)
    items = generate(ITEMS + NULL, seed)
    bench, null = items[:ITEMS], items[ITEMS:]
    for name, rows in (("bench.jsonl", bench), ("null.jsonl", null)):
        (root / name).write_text("".join(json.dumps({"id": r["id"], "input": r["input"], "target": r["target"]})
                                         + "\n" for r in rows))
    reps = wordnet_rephrases(bench[:PLANTED], 0.5, seed=seed)
    planted = [reps[r["id"]]["rephrase"] for r in bench[:PLANTED] if reps[r["id"]]["reason"] is None]
    ps = sotu_passages(64, None, seed=seed)
    docs = [" ".join(p["text"] for p in ps[i:i + 8]) for i in range(0, len(ps) - 7, 8)]
    corpus = root / "corpus"
    corpus.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    written = k = f = in_file = 0
    fh = None
    while written < words:
        if fh is None or in_file >= FILE_WORDS:
            if fh:
                fh.close()
            fh, in_file, f = open(corpus / f"part-{f:04d}.jsonl", "w"), 0, f + 1
        text = docs[k % len(docs)]
        if k < len(planted):
            w = text.split()
            at = int(rng.integers(0, len(w)))
            text = " ".join(w[:at] + planted[k].split() + w[at:])
        fh.write(json.dumps({"id": f"doc{k}", "text": text}) + "\n")
        n = len(text.split())
        written, in_file, k = written + n, in_file + n, k + 1
    fh.close()
    return {"words": written, "documents": k, "files": f, "bytes": sum(p.stat().st_size for p in corpus.iterdir()),
            "planted": len(planted), "planted_ids": [r["id"] for r in bench[:PLANTED]
                                                     if reps[r["id"]]["reason"] is None]}


def run_semantic(root: Path, out: Path, embedder: str, extra: list[str]) -> dict:
    from bench.scale_jobs import run_job

    args = ["overlap", "--benchmark", str(root / "bench.jsonl"), "--corpus", str(root / "corpus"), "--semantic",
            "--n", "0", "--embedder", embedder, "--null", str(root / "null.jsonl"), "--top-k", "100",
            "--out", str(out), *extra]
    res = run_job(args, out, "report.json")
    report = json.loads((out / "report.json").read_text())["semantic"]
    res["semantic"] = {k: report.get(k) for k in ("n", "flagged", "share", "threshold", "expected_false_flag_rate",
                                                  "counts", "prefilter", "seconds")}
    return res


def planted_recall(out: Path, ids: list[str]) -> dict:
    import pyarrow.parquet as pq

    rows = {r["id"]: r["rephrased"] for r in pq.read_table(out / "semantic.parquet", columns=["id", "rephrased"])
            .to_pylist()}
    found = sum(bool(rows.get(i)) for i in ids)
    return {"planted": len(ids), "found": found, "others_flagged": sum(v for k, v in rows.items() if k not in ids)}


def tiny_model(root: Path) -> str:
    from scoring.semantic.tiny import tiny_sentence_model

    path = root / "tiny-embedder"
    if not (path / "modules.json").is_file():
        import itertools

        from scoring.studies.known_membership import sotu_passages

        texts = [p["text"] for p in itertools.islice(sotu_passages(64, 2000, seed=1), 2000)]
        m = tiny_sentence_model(texts, vocab_size=2000)
        m.model.save_pretrained(path)
        m.tokenizer.save_pretrained(path)
        for rel, text in m.files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_text(text)
    return str(path)


def window_texts(root: Path, n: int) -> list[str]:
    from scoring.semantic.windows import WindowPlan, cut_windows

    out = []
    for line in (root / "corpus" / "part-0000.jsonl").open():
        out += [w.text for w in cut_windows(json.loads(line)["text"], WindowPlan(58, 29))]
        if len(out) >= n:
            return out[:n]
    return out


def throughput(root: Path, embedder: str, threads: int) -> dict:
    """Windows per second: Tidemark's Embedder against sentence-transformers encode at its best batch size."""
    import torch

    from scoring.semantic.embed import Embedder, resolve_embedder

    torch.set_num_threads(threads)
    texts = window_texts(root, THROUGHPUT_WINDOWS)
    path = str(resolve_embedder(embedder))
    ours = Embedder(path)
    ours.embed(texts[:64])  # warm
    t = time.perf_counter()
    mine = ours.embed(texts)
    out = {"windows": len(texts), "threads": threads, "tidemark_windows_per_s": round(len(texts) /
                                                                                    (time.perf_counter() - t), 1)}
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return out | {"sentence_transformers": "not installed (make bench-semantic installs it)"}
    import sentence_transformers

    st = SentenceTransformer(path, device="cpu")
    st.encode(texts[:64])
    best = {}
    for b in ST_BATCHES:
        t = time.perf_counter()
        theirs = st.encode(texts, batch_size=b, normalize_embeddings=True)
        best[b] = round(len(texts) / (time.perf_counter() - t), 1)
    top = max(best, key=best.get)
    cos = float(np.min(np.sum(np.asarray(mine) * theirs, axis=1)))
    return out | {"sentence_transformers": sentence_transformers.__version__, "st_windows_per_s_by_batch": best,
                  "st_best_batch": top, "st_best_windows_per_s": best[top],
                  "cost_ratio": round(best[top] / out["tidemark_windows_per_s"], 3),
                  "min_cosine_between_the_two_embeddings": round(cos, 6)}


def main(argv=None) -> int:
    from bench.common import environment, write_json

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--work", default="/tmp/tidemark-semantic-scale")
    ap.add_argument("--words", type=int, default=1_000_000)
    ap.add_argument("--skip", nargs="*", default=[], choices=["full", "prefilter", "memory", "throughput"])
    args = ap.parse_args(argv)
    work = Path(args.work)
    result: dict = {"command": "python -m bench.semantic_scale " + " ".join(argv if argv is not None
                                                                           else sys.argv[1:]),
                    "environment": environment("cpu"), "runs": {}}
    t0 = time.perf_counter()
    inputs = write_inputs(work / "x1", args.words)
    result["inputs"] = {k: v for k, v in inputs.items() if k != "planted_ids"}
    log(f"1x corpus: {inputs['words']:,} words, {inputs['bytes'] / 1e6:.1f} MB, {inputs['files']} files")
    for name, extra in (("full", []), ("prefilter", ["--prefilter", "0.5"])):
        if name in args.skip:
            continue
        log(f"{name}: overlap --semantic, all-MiniLM-L6-v2 ...")
        out = work / f"out-{name}"
        res = run_semantic(work / "x1", out, "minilm", extra)
        res["planted"] = planted_recall(out, inputs["planted_ids"])
        res.pop("rss_timeline_mb", None)
        result["runs"][name] = res
        log(f"{name}: {res['wall_s']} s, driver peak {res['driver_peak_mb']} MB, {res['planted']}")
    if "throughput" not in args.skip:
        result["throughput"] = throughput(work / "x1", "minilm", 2)
        log(f"throughput: {result['throughput']}")
    if "memory" not in args.skip:
        tiny = tiny_model(work)
        for mult in (1, 8):
            root = work / f"x{mult}" if mult == 1 else work / "x8"
            if mult != 1:
                write_inputs(root, args.words * mult)
            res = run_semantic(root, work / f"out-mem-{mult}", tiny, [])
            result["runs"][f"memory_{mult}x_tiny"] = res
            log(f"memory {mult}x: {res['wall_s']} s, driver peak {res['driver_peak_mb']} MB")
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    write_json(args.out, "semantic_scale", result)
    (Path(args.out) / "semantic_scale.md").write_text(render(result))
    log(f"wrote {args.out}/semantic_scale.json and .md")
    return 0


def render(r: dict) -> str:
    env = r["environment"]
    lines = ["# `overlap --semantic` at scale (issue 57)", "",
             f"Command: `{r['command']}` · {env['timestamp']} · {env['device_name']}, "
             f"load average at the end {env['load_average']} · git {env['git'].get('commit', '')[:10]}"
             f"{' (dirty)' if env['git'].get('dirty') else ''} · wall {r['wall_seconds']} s.", "",
             f"Corpus: {r['inputs']['words']:,} words ({r['inputs']['bytes'] / 1e6:.1f} MB, {r['inputs']['files']} "
             f"files, {r['inputs']['documents']:,} documents); {ITEMS:,} items and a {NULL}-item null; "
             f"{r['inputs']['planted']} items planted as WordNet rephrases. Each run is the whole command as a "
             "subprocess with its own local Ray, start-up included; top 100.", "",
             "| run | wall (s) | windows cut | windows embedded | flagged | planted found | other items flagged | "
             "threshold | driver peak (MB) | workers peak (MB) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, x in r["runs"].items():
        s, c = x["semantic"], x["semantic"]["counts"]
        p = x.get("planted") or {}
        lines.append(f"| {name} | {x['wall_s']} | {c.get('windows_cut', c['windows']):,} | {c['windows']:,} | "
                     f"{s['flagged']} | {p.get('found', '—')}/{p.get('planted', '—')} | "
                     f"{p.get('others_flagged', '—')} | {s['threshold']:.4f} | {x['driver_peak_mb']} | "
                     f"{x['workers_peak_mb']} |")
    t = r.get("throughput")
    if t:
        lines += ["", f"Embedding throughput over {t['windows']:,} windows of 58 words, torch threads {t['threads']}: "
                      f"Tidemark's Embedder {t['tidemark_windows_per_s']} windows/s."]
        if "st_best_windows_per_s" in t:
            lines += [f"sentence-transformers {t['sentence_transformers']} `encode` by batch size: "
                      f"{t['st_windows_per_s_by_batch']}; best {t['st_best_windows_per_s']} windows/s at "
                      f"{t['st_best_batch']}. Marginal cost of Tidemark's embedder: {t['cost_ratio']}x "
                      f"(target <= 1.2x); the two embeddings agree to a cosine of at least "
                      f"{t['min_cosine_between_the_two_embeddings']}."]
        else:
            lines.append(f"sentence-transformers: {t['sentence_transformers']}.")
        full = r["runs"].get("full")
        if full and "st_best_windows_per_s" in t:
            w = full["semantic"]["counts"]["windows"]
            job = w / full["wall_s"]
            lines += ["", f"The whole `full` run, start-up, reading, cutting, the items' embedding and the merge "
                          f"included: {w:,} windows in {full['wall_s']} s, {job:.1f} windows/s, "
                          f"{t['st_best_windows_per_s'] / job:.2f}x the cost of sentence-transformers' best encode "
                          "loop over the windows alone."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
