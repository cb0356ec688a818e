"""The approximate search of `overlap --index --semantic` (scoring/semantic/ann.py) against exact search: recall of
the exact top k, and build, calibration and query time, on real MiniLM vectors and on a million synthetic ones.

    python -m bench.semantic_ann [--n 1000000] [--queries 1000] [--out bench/results]

Real: the window and query vectors the rephrase study cached (bench/results/_work/semantic_windows_*.npy and
semantic_queries_*.npy: all-MiniLM-L6-v2, 58-word windows of State of the Union addresses, GSM8K-style items),
the largest of each; skipped, with the reason, when the study has not run here. The shard is small (~20k), below
ann.EXACT_BELOW, so the index is forced (min_vectors=1) to measure its recall; HNSW (faiss, M=32) beside it.

Synthetic: `--n` unit vectors of 384 dims, and `--queries` more of the same law, not in the set: a Gaussian
mixture fitted to the study's MiniLM windows (a shared mean of norm 0.38; covariance eigenvalues falling as
i^-0.92 over a random basis, total variance 0.85; 2,048 clusters carrying 70% of it), normalised. Fitted so that
at 20k it looks to the index as the real windows do: mean, top-10 and top-100 cosines of a window 0.15 / 0.59 /
0.43 (real: 0.15 / 0.56 / 0.47) and a calibrated nprobe of 79 of 141 lists (real: 80 of 140). A mixture of a few
tight clusters instead, with the same cosines, needed 5 lists: it would flatter the index. Stored as float16
(index-corpus's default). Prefixes of the set give the exact-vs-index crossover behind ann.EXACT_BELOW.

Writes bench/results/semantic_ann.json and .md (machine, command, date, git commit).
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench" / "results" / "_work"
KS = (10, 100)
MIXTURE = {"alpha": 0.92, "total_variance": 0.85, "mean_norm": 0.38, "clusters": 2048, "cluster_share": 0.7,
           "seed": 0}


def log(msg: str) -> None:
    print(f"[semantic-ann] {msg}", file=sys.stderr, flush=True)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def mixture(n: int, d: int, seed: int, cfg: dict = MIXTURE, dtype=np.float16) -> np.ndarray:
    """n unit vectors of the fitted mixture (its mean, basis and cluster centres from cfg's seed, the points from
    `seed`)."""
    rng = np.random.default_rng(cfg["seed"])
    basis = np.linalg.qr(rng.standard_normal((d, d)))[0]
    ev = np.arange(1, d + 1, dtype=np.float64) ** -cfg["alpha"]
    ev *= cfg["total_variance"] / ev.sum()
    mean = unit(rng.standard_normal(d)) * cfg["mean_norm"]
    share = cfg["cluster_share"]
    centres = (rng.standard_normal((cfg["clusters"], d)) * np.sqrt(ev * share)) @ basis.T
    rng = np.random.default_rng(seed)
    which = rng.integers(0, cfg["clusters"], n)
    out = np.empty((n, d), dtype)
    for lo in range(0, n, 1 << 16):
        hi = min(n, lo + (1 << 16))
        spread = (rng.standard_normal((hi - lo, d)) * np.sqrt(ev * (1 - share))) @ basis.T
        out[lo:hi] = unit(mean + centres[which[lo:hi]] + spread)
    return out


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return round(time.perf_counter() - t0, 3), out


def cosines(queries: np.ndarray, keys: np.ndarray) -> dict:
    """The median over queries of the mean, 10th and 100th highest cosine: how the set looks to a query."""
    s = queries[:200].astype(np.float32) @ keys[:20000].astype(np.float32).T
    top = np.sort(s, 1)
    return {"mean": round(float(s.mean()), 3), "top10": round(float(np.median(top[:, -10])), 3),
            "top100": round(float(np.median(top[:, -100])), 3)}


def measure(keys: np.ndarray, queries: np.ndarray, settings, exact: dict | None = None) -> dict:
    """Build (train, add, calibrate) the index over keys, search at each k, recall against exact search."""
    from scoring.semantic import ann
    from scoring.semantic.search import recall_at_k, top_k_rows

    build_s, shard = timed(lambda: ann.build(keys, settings))
    out = {"n": len(keys), "build_total_s": build_s, **shard.info}
    for k in KS:
        if exact is None or k not in exact:
            t, (_, ids) = timed(lambda: top_k_rows(queries, keys, k))
            exact = {**(exact or {}), k: (t, ids)}
        search_s, (_, got) = timed(lambda: ann.search(shard, keys, queries, k))
        out[f"k{k}"] = {"recall": round(recall_at_k(got, exact[k][1]), 5), "search_s": search_s,
                        "exact_s": exact[k][0], "speedup": round(exact[k][0] / max(search_s, 1e-9), 2)}
    return out


def hnsw(keys: np.ndarray, queries: np.ndarray, exact_ids: dict, m: int = 32) -> dict:
    import faiss

    from scoring.semantic.search import recall_at_k, sort_top_k

    index = faiss.IndexHNSWFlat(keys.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 200
    build_s, _ = timed(lambda: index.add(np.ascontiguousarray(keys, np.float32)))
    out = {"M": m, "efConstruction": 200, "build_s": build_s}
    for k in KS:
        for ef in (128, 256):
            index.hnsw.efSearch = max(ef, k)
            t, (s, i) = timed(lambda: index.search(np.ascontiguousarray(queries, np.float32), k))
            out[f"k{k}_ef{ef}"] = {"recall": round(recall_at_k(sort_top_k(s, i, k)[1], exact_ids[k]), 5),
                                   "search_s": t}
    return out


def real_set(settings_cls) -> dict:
    from scoring.semantic.search import recall_at_k, top_k_rows

    windows, queries = sorted(WORK.glob("semantic_windows_*.npy")), sorted(WORK.glob("semantic_queries_*.npy"))
    if not windows or not queries:
        return {"skipped": f"no cached study vectors under {WORK} (python -m bench.semantic_study makes them, with "
                           "models/all-MiniLM-L6-v2 from `make minilm`)"}
    wpath = max(windows, key=lambda p: np.load(p, mmap_mode="r").shape[0])
    qpath = max(queries, key=lambda p: np.load(p, mmap_mode="r").shape[0])
    w32, q = np.load(wpath), np.load(qpath)
    out: dict = {"windows_file": wpath.name, "queries_file": qpath.name, "windows": len(w32), "queries": len(q),
                 "cosines": cosines(q, w32)}
    exact32 = {k: timed(lambda: top_k_rows(q, w32, k)) for k in KS}
    exact32 = {k: (t, r[1]) for k, (t, r) in exact32.items()}
    w16 = w32.astype(np.float16)
    # what storing the vectors as float16 alone costs: exact search over them against exact float32
    out["float16_storage_recall"] = {f"k{k}": round(recall_at_k(top_k_rows(q, w16, k)[1], exact32[k][1]), 5)
                                     for k in KS}
    forced = settings_cls(min_vectors=1)
    out["ivf_float32"] = measure(w32, q, forced, exact32)
    out["ivf_float16_vs_exact_float32"] = measure(w16, q, forced, exact32)
    out["hnsw_float32"] = hnsw(w32, q, {k: v[1] for k, v in exact32.items()})
    return out


def synthetic_set(n: int, n_queries: int, settings_cls, d: int = 384) -> dict:
    gen_s, keys = timed(lambda: mixture(n, d, seed=1))
    queries = mixture(n_queries, d, seed=2).astype(np.float32)
    out: dict = {"n": n, "dim": d, "queries": n_queries, "mixture": MIXTURE, "generate_s": gen_s,
                 "cosines_at_20k": cosines(queries, keys), "storage": "float16", "sizes": []}
    for size in sorted({s for s in (50_000, 100_000, 250_000) if s < n} | {n}):
        log(f"synthetic: {size:,} vectors")
        got = measure(keys[:size], queries, settings_cls(min_vectors=1))
        out["sizes"].append(got)
    return out


def target_line(res: dict, target: float = 0.99) -> str:
    """Whether every IVF measurement reached the target recall of the exact top k, and the lowest one."""
    runs = [m for m in res["synthetic"]["sizes"]]
    if "skipped" not in res["real"]:
        runs += [res["real"]["ivf_float32"], res["real"]["ivf_float16_vs_exact_float32"]]
    got = [(m[f"k{k}"]["recall"], m["n"], k) for m in runs for k in KS]
    low = min(got)
    return (f"Target recall >= {target} of exact search: met in {sum(r >= target for r, _, _ in got)} of {len(got)} "
            f"IVF measurements; the lowest, {low[0]}, at {low[1]:,} vectors and k = {low[2]}.")


def markdown(res: dict) -> str:
    env, r, s = res["environment"], res["real"], res["synthetic"]
    lines = ["# Approximate window search (scoring/semantic/ann.py) against exact search", "",
             f"- Command: `{res['command']}`", f"- Date: {env['timestamp']}; git commit {env['git']['commit']}"
             f"{' (uncommitted changes)' if env['git']['dirty'] else ''}",
             f"- Machine: {env['device_name']}, load average {env['load_average']}; faiss {res['faiss']}, "
             f"{res['threads']} thread(s)", f"- Run time: {res['seconds']} s", "",
             f"Index: IVF, nlist = round(sqrt(n)), nprobe calibrated per shard for recall "
             f"{res['settings']['target_recall']} on {res['settings']['calibration_queries']} of the shard's own "
             f"vectors (each one's own left out) at k = 10 and {res['settings']['calibration_k']}; recall below is on the benchmark-like queries, "
             "of the exact top k over the same vectors.", "", target_line(res), ""]
    if "skipped" in r:
        lines += ["## Real MiniLM vectors", "", f"Skipped: {r['skipped']}", ""]
    else:
        lines += ["## Real MiniLM vectors (the rephrase study's windows and items)", "",
                  f"{r['windows']:,} windows x 384 ({r['windows_file']}), {r['queries']:,} queries "
                  f"({r['queries_file']}); cosines seen by a query (median): {r['cosines']}.", "",
                  f"Exact search over float16-stored vectors against float32: recall {r['float16_storage_recall']}.",
                  "", "| index | storage | nlist | nprobe | build+calibrate s | recall@10 | recall@100 | "
                  "search s (k=100) | exact s (k=100) |", "|---|---|---|---|---|---|---|---|---|"]
        for name, storage in (("ivf_float32", "float32"), ("ivf_float16_vs_exact_float32", "float16")):
            m = r[name]
            lines.append(f"| IVF | {storage} | {m['nlist']} | {m['nprobe']} | {m['build_total_s']} | "
                         f"{m['k10']['recall']} | {m['k100']['recall']} | {m['k100']['search_s']} | "
                         f"{m['k100']['exact_s']} |")
        h = r["hnsw_float32"]
        for ef in (128, 256):
            lines.append(f"| HNSW M={h['M']} efSearch={ef} | float32 | - | - | {h['build_s']} | "
                         f"{h[f'k10_ef{ef}']['recall']} | {h[f'k100_ef{ef}']['recall']} | "
                         f"{h[f'k100_ef{ef}']['search_s']} | {r['ivf_float32']['k100']['exact_s']} |")
        lines.append("")
    lines += [f"## Synthetic: {s['n']:,} x {s['dim']} clustered, float16, {s['queries']:,} queries", "",
              f"Mixture {s['mixture']}; cosines seen by a query at 20k (median): {s['cosines_at_20k']} "
              f"(generated in {s['generate_s']} s).", "",
              "| vectors | nlist | nprobe | train+add s | calibrate s | recall@10 | recall@100 | search s k=10 | "
              "search s k=100 | exact s k=100 | speedup k=100 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in s["sizes"]:
        lines.append(f"| {m['n']:,} | {m['nlist']} | {m['nprobe']} | {m['build_s']} | {m['calibrate_s']} | "
                     f"{m['k10']['recall']} | {m['k100']['recall']} | {m['k10']['search_s']} | "
                     f"{m['k100']['search_s']} | {m['k100']['exact_s']} | {m['k100']['speedup']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import faiss

    from bench.common import environment, write_json
    from scoring.semantic import ann

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="synthetic vectors")
    ap.add_argument("--queries", type=int, default=1000, help="synthetic queries")
    ap.add_argument("--threads", type=int, default=None, help="faiss threads (default: its own)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args(argv)
    ann.set_threads(args.threads)
    t0 = time.perf_counter()
    log("real MiniLM vectors")
    real = real_set(ann.AnnSettings)
    synthetic = synthetic_set(args.n, args.queries, ann.AnnSettings)
    command = " ".join(["python -m bench.semantic_ann", shlex.join(sys.argv[1:] if argv is None else argv)]).strip()
    res = {"what": __doc__.split("\n\n")[0], "command": command,
           "environment": environment(), "faiss": faiss.__version__, "threads": faiss.omp_get_max_threads(),
           "settings": ann.AnnSettings().as_dict(), "exact_below": ann.EXACT_BELOW, "real": real,
           "synthetic": synthetic, "seconds": round(time.perf_counter() - t0, 1)}
    write_json(args.out, "semantic_ann", res)
    (Path(args.out) / "semantic_ann.md").write_text(markdown(res))
    log(f"done in {res['seconds']} s: {args.out}/semantic_ann.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
