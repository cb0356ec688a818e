"""Black-box scoring cost against the loopback server (scoring/api/loopback.py, in its own process on 127.0.0.1):
requests, tokens per request, requests per predicted token and rows/s for echo and the logit-bias methods, at
several per-actor concurrency settings, beside the local scorer on the same weights; and each method's largest
|lp − local lp|. No Ray: this measures the scorer over HTTP, which is what an actor runs.

  python -m bench.api_bench --out bench/results            (also `make bench`, as the `api` benchmark)

What it cannot say: how a real server (vLLM on a GPU) scales with concurrency. The loopback server runs one
forward at a time on one CPU thread, so concurrency here only hides HTTP and JSON latency.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FULL = {"rows": 200, "words": 64, "echo_concurrency": (1, 4, 8), "inversion_rows": 40, "search_rows": 8,
        "bias_concurrency": (1, 8)}
QUICK = {"rows": 40, "words": 64, "echo_concurrency": (1, 8), "inversion_rows": 10, "search_rows": 2,
         "bias_concurrency": (8,)}


def log(msg: str) -> None:
    print(msg, flush=True)


def serve(model: str, bias_logprobs: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "scoring.api.loopback", "--model", model, "--name", "bench",
                             "--bias-logprobs", bias_logprobs, "--lifetime-s", "900"],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the loopback server did not start (printed {url!r})")
    return proc, url


def run_api(cfg: dict, work: Path, shared: dict | None = None) -> dict:
    import torch

    from scoring.api.client import ApiConfig
    from scoring.api.probe import probe
    from scoring.api.scorer import ApiScorer
    from scoring.studies.known_membership import sotu_passages
    from scoring.lm.model import load_causal_lm
    from scoring.lm.scorer import Scorer
    from jobs.kit.studies import train_tiny_gpt2

    torch.set_num_threads(1)  # the server gets the other core
    texts = [p["text"] for p in sotu_passages(cfg["words"], cfg["rows"])]
    model_dir = work / "api_model"
    train_tiny_gpt2(texts, model_dir, steps=60, context=128, seed=0)
    lm, tok = load_causal_lm(str(model_dir), device="cpu")
    ids = [tok(t)["input_ids"] for t in texts]
    local = Scorer(lm, model_name="local")
    t0 = time.perf_counter()
    want = local.score(ids)
    local_s = time.perf_counter() - t0
    n_tokens = sum(len(w["lp"]) for w in want)
    runs = [{"method": "local", "concurrency": None, "rows": len(ids), "seconds": round(local_s, 3),
             "rows_per_s": round(len(ids) / local_s, 1), "predicted_tokens": n_tokens}]
    plan = [("after", "echo", cfg["rows"], cfg["echo_concurrency"]),
            ("after", "logit-bias", cfg["inversion_rows"], cfg["bias_concurrency"]),
            ("before", "logit-bias", cfg["inversion_rows"], cfg["bias_concurrency"][-1:]),
            ("hidden", "logit-bias", cfg["search_rows"], cfg["bias_concurrency"][-1:])]
    for server_mode, mode, rows, concurrencies in plan:
        proc, url = serve(str(model_dir), server_mode)
        try:
            for conc in concurrencies:
                probed, report = probe(ApiConfig(base=url, model="bench", mode=mode, concurrency=conc), tok)
                scorer = ApiScorer(probed, tok, context=local.context, stride=local.stride)
                t0 = time.perf_counter()
                got = scorer.score(ids[:rows])
                seconds = time.perf_counter() - t0
                scorer.close()
                st = scorer.stats()
                err = max(float(np.max(np.abs(g["lp"] - w["lp"]))) for g, w in zip(got, want[:rows]))
                run = {"method": probed.method, "server": server_mode, "concurrency": conc, "rows": rows,
                       "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds, 2), "calls": st["calls"],
                       "predicted_tokens": st["positions"], "calls_per_token": round(st["calls"] / st["positions"], 3),
                       "tokens_per_call": round(st["prompt_tokens"] / st["calls"], 1),
                       "max_abs_lp_error": err, "reported_bound": st["max_bound"], "beyond_bias": st["beyond_bias"],
                       "errors": sum(1 for g in got if g["error"])}
                runs.append(run)
                log(f"[api] {run['method']:9s} c={conc}: {run['rows_per_s']:8.2f} rows/s, "
                    f"{run['calls_per_token']:.3f} calls/token, {run['tokens_per_call']:.1f} tokens/call, "
                    f"max |Δlp| {err:.2e}")
        finally:
            proc.kill()
            proc.wait()
    return {"model": "tiny GPT-2 (2 layers x 128, 2000-token BPE), fp32, CPU", "passage_words": cfg["words"],
            "server": "scoring/api/loopback.py in a subprocess, 1 torch thread, one forward at a time",
            "client": "ApiScorer (scoring/api/scorer.py), no Ray, 1 torch thread", "runs": runs}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = result["runs"]
    labels = [r["method"] + ("" if r["concurrency"] is None else f"\nc={r['concurrency']}") for r in runs]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.bar(range(len(runs)), [r["rows_per_s"] for r in runs], color=["#555"] + ["#3a7"] * (len(runs) - 1))
    ax.set_xticks(range(len(runs)), labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("rows/s (log)")
    ax.set_title(f"Scoring over the loopback API vs local ({result['passage_words']}-word passages, 2 CPU cores)")
    for i, r in enumerate(runs):
        if r.get("calls_per_token"):
            ax.annotate(f"{r['calls_per_token']:.2g} calls/tok", (i, r["rows_per_s"]), ha="center", va="bottom",
                        fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.api_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import shutil
    import tempfile

    from bench.common import environment, write_json

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="api_bench_"))
    try:
        t0 = time.perf_counter()
        res = run_api(QUICK if args.quick else FULL, work)
        payload = {"name": "api", "quick": args.quick, "environment": environment("cpu"),
                   "seconds": round(time.perf_counter() - t0, 1), **res}
        write_json(out, "api", payload)
        plot(res, out / "api_scoring.png")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log(f"[api] results: {out / 'api.json'}, {out / 'api_scoring.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
