"""`make bench`: the CPU benchmarks of issue 5, side by side in one run, written to --out.

  python -m bench.run --out bench/results            # the full run (target: under 10 minutes on 2 cores)
  python -m bench.run --quick --out /tmp/bench       # a small sanity run of every benchmark (~1–2 minutes)
  python -m bench.run --only throughput,memory       # a subset

Benchmarks (each writes <out>/<name>.json; all together <out>/summary.md and <out>/scorer_throughput.png):
  throughput  Tidemark's scorer vs a batch-1 research loop vs naive padded batching, tokens/s at 32/128/512/2048
              tokens and a mixed-length set, on GPT-2 configs with random weights (gpt2-tiny 0.9M, gpt2-36m)
  memory      peak memory vs batch × length, and flatness in vocabulary size (no B×T×V fp32 logits)
  detectors   all seven single-pass detectors vs `loss` alone (target ≤ 1.3×), and vs one forward per metric
  e2e         `tidemark evaluate` end to end (Ray start-up included) vs a bare batch-1 loop (target ≤ 2.5×)
  curation    Stack Exchange posts/s on one core: parse, and parse + row-level filters
  shift_audit the blind-baseline shift audit of a 10k-row benchmark (target: under a minute on 2 cores)
  api         scoring over the loopback OpenAI-compatible server: echo vs logit-bias methods, calls per token,
              rows/s at several concurrencies, and the error against local scoring (also api_scoring.png)
  paraphrase  the known-membership study's AUCs on the original and on WordNet- and MLM-paraphrased copies, every
              detector incl. neighbour (also paraphrase.md: the README's table)
  canary      the canary test's false-positive rate under the null (1,000 re-drawn coins on canaries no model saw)
              and its power against repetitions and canary length (tiny GPT-2s trained with planted canaries;
              also canary.md and canary.png)
  cutoff      `tidemark cutoff` on controlled dated studies: the cutoff recovered per source, the false-positive
              rate of p_no_cutoff over re-drawn null sets (models trained on every month or none), a step in the
              texts with and without a reference model, versions, and a text-only run (also cutoff.md, cutoff.png)
  impact      `tidemark impact` on a controlled study (tiny GPT-2s, a leaked half of a word-problem benchmark): the
              measured gap and difference-in-differences against the true gain, the clean score against the
              uncontaminated twin's, the easy-items confound, ConStat and its null rate (also impact.md)
  trace       `tidemark trace` on a controlled study (a tiny GPT-2 trained many times on some passages, a control
              that never read them): the share of continuations traced, document-level precision and recall, the
              control's spans (also trace.md)
  generation  text-only audits (--api-logprobs none) against the loopback server: a known-membership study over
              completions and chat, the set test under the null, requests/s at concurrency 1/4/8 vs a plain
              sequential client loop, and each method's cost per 1,000 rows (also generation.md)
  chaos       the real CLI on a genuine two-node Ray cluster (ray.cluster_utils.Cluster) losing its worker node
              mid-job (evaluate, audit, build-benchmark), a driver SIGKILLed before a head restart, a cluster left
              with no room for a scorer: what was killed, when, what the job did, seconds lost, outputs identical
The GPU benchmark is `python -m bench.gpu` (no Ray needed); see docs/scaling.md.

Timings on a shared machine are noisy: every result records the load average before and after it ran.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

BENCHES = ("throughput", "memory", "detectors", "e2e", "curation", "shift_audit", "api", "paraphrase", "canary",
           "generation", "cutoff", "impact", "trace", "chaos")

FULL = {
    "throughput": {"models": {"gpt2-tiny": {"tokens": 16384, "repeats": 2}, "gpt2-36m": {"tokens": 4096, "repeats": 1}},
                   "lengths": (32, 128, 512, 2048), "batch": 16},
    "memory": {"vocabs": (2000, 32000, 128000), "grid": ((1, 128), (4, 512), (8, 512)), "naive_limit_bytes": 6e8},
    "detectors": {"passages": 300},
    "e2e": {"passages": 2000},
    "curation": {"repeats": 3},
    "shift_audit": {"rows": 10_000},
    "api": None,  # bench/api_bench.py's FULL
    "paraphrase": None,  # bench/paraphrase_study.py's FULL
    "canary": None,  # bench/canary_bench.py's FULL
    "generation": None,  # bench/generation_bench.py's FULL
    "cutoff": None,  # bench/cutoff_bench.py's FULL
    "impact": None,  # bench/impact_bench.py's FULL
    "trace": None,  # bench/trace_study.TraceStudy()
    "chaos": None,  # every scenario of bench/chaos_bench.py
}
QUICK = {
    "throughput": {"models": {"gpt2-tiny": {"tokens": 2048, "repeats": 1}}, "lengths": (32, 128, 512), "batch": 8},
    "memory": {"vocabs": (2000, 32000), "grid": ((1, 64), (4, 256)), "naive_limit_bytes": 2e8},
    "detectors": {"passages": 30},
    "e2e": {"passages": 100},
    "curation": {"repeats": 1},
    "shift_audit": {"rows": 1_000},
    "api": "quick",  # bench/api_bench.py's QUICK
    "paraphrase": "quick",  # bench/paraphrase_study.py's QUICK
    "canary": "quick",  # bench/canary_bench.py's QUICK
    "generation": "quick",  # bench/generation_bench.py's QUICK
    "cutoff": "quick",  # bench/cutoff_bench.py's QUICK
    "impact": "quick",  # bench/impact_bench.py's QUICK
    "trace": "quick",  # bench/trace_study.QUICK
    "chaos": ("evaluate-node-loss",),
}
PASSAGE_WORDS = 104  # ~170 tokens with the tiny model's 2000-token BPE (the "~170 tokens")


def log(msg: str) -> None:
    print(msg, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results", help="directory for the JSON results, summary.md and the plot")
    ap.add_argument("--quick", action="store_true", help="small sizes: a sanity run of every benchmark")
    ap.add_argument("--only", default=",".join(BENCHES), help=f"comma-separated subset of: {', '.join(BENCHES)}")
    ap.add_argument("--work", default=None, help="scratch directory (default: <out>/_work, removed at the end)")
    args = ap.parse_args(argv)

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    only = [b.strip() for b in args.only.split(",") if b.strip()]
    unknown = set(only) - set(BENCHES)
    if unknown:
        ap.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    plan = QUICK if args.quick else FULL
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else out / "_work"
    work.mkdir(parents=True, exist_ok=True)

    from bench.common import environment, load_average, write_json

    started = time.perf_counter()
    results: dict[str, dict] = {}
    errors: dict[str, str] = {}
    # The tiny model's tokenizer is trained once, on every passage the detector and e2e benchmarks use.
    shared: dict = {"n_train": max(plan["detectors"]["passages"], plan["e2e"]["passages"])}
    for name in [b for b in BENCHES if b in only]:
        log(f"[bench] {name} ...")
        env = environment("cpu")
        t0 = time.perf_counter()
        try:
            payload = RUNNERS[name](plan[name], work, shared)
        except Exception as exc:  # noqa: BLE001 - one failing benchmark must not hide the others' results
            errors[name] = f"{type(exc).__name__}: {exc}"
            log(f"[bench] {name} FAILED: {errors[name]}\n{traceback.format_exc()}")
            continue
        payload = {"name": name, "quick": args.quick, "environment": env, "load_average_after": load_average(),
                   "seconds": round(time.perf_counter() - t0, 2), **payload}
        results[name] = payload
        write_json(out, name, payload)
        log(f"[bench] {name} done in {payload['seconds']:.1f} s")
    total = time.perf_counter() - started
    if "paraphrase" in results:
        (out / "paraphrase.md").write_text(results["paraphrase"]["table_md"])
    if "canary" in results:
        from bench.canary_bench import markdown as canary_md, plot as plot_canary

        (out / "canary.md").write_text(canary_md(results["canary"]))
        plot_canary(results["canary"], out / "canary.png")
    if "cutoff" in results:
        from bench.cutoff_bench import markdown as cutoff_md, plot as plot_cutoff

        (out / "cutoff.md").write_text(cutoff_md(results["cutoff"]))
        plot_cutoff(results["cutoff"], out / "cutoff.png")
    if "impact" in results:
        from bench.impact_bench import markdown as impact_md

        (out / "impact.md").write_text(impact_md(results["impact"]))
    if "trace" in results:
        from bench.trace_bench import markdown as trace_md

        (out / "trace.md").write_text(trace_md(results["trace"]))
    if "generation" in results:
        from bench.generation_bench import markdown as generation_md

        (out / "generation.md").write_text(generation_md(results["generation"]))
    if "api" in results:
        from bench.api_bench import plot as plot_api

        plot_api(results["api"], out / "api_scoring.png")
    if "throughput" in results:
        from bench.plots import plot_throughput

        plot_throughput(results["throughput"]["models"], out / "scorer_throughput.png",
                        title="Tidemark scorer vs research-style loops (CPU, one run)")
    from bench.summary import render_summary

    summary = render_summary(_with_earlier(results, out), errors, total, args)
    (out / "summary.md").write_text(summary)
    write_json(out, "run", {"benches": list(results), "errors": errors, "total_seconds": round(total, 1),
                            "quick": args.quick, "command": " ".join(sys.argv)})
    if not args.work:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    log(f"[bench] total {total:.1f} s; summary: {out / 'summary.md'}")
    return 1 if errors else 0


def _with_earlier(results: dict, out: Path) -> dict:
    """This run's results, and for benchmarks it did not run, the results already in `out` (a --only run rewrites
    summary.md without dropping the others)."""
    import json

    merged = {}
    for name in BENCHES:
        if name in results:
            merged[name] = results[name]
        elif (out / f"{name}.json").is_file():
            merged[name] = json.loads((out / f"{name}.json").read_text())
            if name == "paraphrase" and (out / "paraphrase.md").is_file():  # its table is kept beside the json
                merged[name].setdefault("table_md", (out / "paraphrase.md").read_text())
    return merged


# ---- runners ----------------------------------------------------------------------------------------------------
def run_throughput(cfg: dict, work: Path, shared: dict) -> dict:
    import torch

    from bench.model_configs import build_model
    from bench.scorer_bench import bench_throughput

    models = []
    for name, opts in cfg["models"].items():
        model = build_model(name, device="cpu", dtype=torch.float32)
        models.append(bench_throughput(model, model_name=name, device="cpu", lengths=cfg["lengths"],
                                       tokens=opts["tokens"], repeats=opts["repeats"], batch=cfg["batch"], log=log))
        del model
    return {"device": "cpu", "dtype": "float32", "lengths": list(cfg["lengths"]), "batch": cfg["batch"],
            "models": models}


def run_memory(cfg: dict, work: Path, shared: dict) -> dict:
    from bench.memory_bench import bench_vocab_flatness

    res = bench_vocab_flatness(device="cpu", vocabs=cfg["vocabs"], grid=cfg["grid"],
                               naive_limit_bytes=cfg["naive_limit_bytes"], log=log)
    return {"device": "cpu", "dtype": "float32", "backbone": "gpt2 2 layers × 128", **res}


def _passages(shared: dict, n: int) -> list[dict]:
    from bench.workspace import passages

    if len(shared.get("passages", [])) < n:
        shared["passages"] = passages(n, words=PASSAGE_WORDS)
    return shared["passages"][:n]


def _model_dir(shared: dict, work: Path) -> str:
    """The tiny GPT-2 (0.7M, context 512) with a tokenizer trained on the benchmark's passages."""
    from bench.workspace import tiny_model_dir

    if "model_dir" not in shared:
        texts = [p["text"] for p in _passages(shared, shared["n_train"])]
        shared["model_dir"] = tiny_model_dir(work, texts)["path"]
    return shared["model_dir"]


def run_detectors(cfg: dict, work: Path, shared: dict) -> dict:
    from bench.detector_bench import bench_detectors

    model_dir = _model_dir(shared, work)
    texts = [p["text"] for p in _passages(shared, cfg["passages"])]
    return {"device": "cpu", "dtype": "float32", **bench_detectors(model_dir, texts, log=log)}


def run_e2e(cfg: dict, work: Path, shared: dict) -> dict:
    import shutil

    from bench.e2e_bench import bench_e2e
    from bench.workspace import write_benchmark

    rows = _passages(shared, cfg["passages"])
    model_dir = _model_dir(shared, work)
    bench_file = write_benchmark(work / "e2e" / "benchmark.jsonl", rows)
    shutil.rmtree(work / "e2e" / "evaluate", ignore_errors=True)  # never resume a previous run's output
    res = bench_e2e(model_dir, bench_file, [r["text"] for r in rows], work / "e2e", log=log)
    return {"device": "cpu", "dtype": "float32", "model": "tiny GPT-2 (2 layers × 128, context 512, random weights)",
            "passage_words": PASSAGE_WORDS, **res}


def run_curation(cfg: dict, work: Path, shared: dict) -> dict:
    from bench.curation_bench import bench_stackexchange_parse
    from bench.curation_filter_bench import bench_parse_and_filter, posts_path

    path, synthetic, note = posts_path(work)
    log(f"  curation: {note}")
    parse = bench_stackexchange_parse(str(path), repeats=cfg["repeats"])
    both = bench_parse_and_filter(str(path), repeats=cfg["repeats"])
    log(f"  curation: parse {parse['posts_per_s']:.0f} posts/s, parse + filters {both['posts_per_s']:.0f} posts/s")
    return {"device": "cpu (1 core)", "synthetic": synthetic, "note": note, "parse": parse, "parse_and_filter": both}


def run_shift_audit(cfg: dict, work: Path, shared: dict) -> dict:
    from bench.shift_audit_bench import bench_shift_audit

    return {"device": "cpu", **bench_shift_audit(cfg["rows"], log=log)}


def run_api(cfg, work: Path, shared: dict) -> dict:
    from bench.api_bench import FULL as API_FULL, QUICK as API_QUICK, run_api as bench_api

    return bench_api(API_QUICK if cfg == "quick" else API_FULL, work)


def run_paraphrase(cfg, work: Path, shared: dict) -> dict:
    from bench.paraphrase_study import FULL as P_FULL, QUICK as P_QUICK, markdown, run_study

    res = run_study(P_QUICK if cfg == "quick" else P_FULL, work / "paraphrase")
    return {**res, "table_md": markdown(res)}


def run_canary(cfg, work: Path, shared: dict) -> dict:
    from bench.canary_bench import FULL as C_FULL, QUICK as C_QUICK, run_bench

    return run_bench(C_QUICK if cfg == "quick" else C_FULL, work / "canary")


def run_generation(cfg, work: Path, shared: dict) -> dict:
    from bench.generation_bench import FULL as G_FULL, QUICK as G_QUICK, run_bench

    return run_bench(G_QUICK if cfg == "quick" else G_FULL, work / "generation")


def run_cutoff(cfg, work: Path, shared: dict) -> dict:
    from bench.cutoff_bench import FULL as C_FULL, QUICK as C_QUICK, run_bench

    return run_bench(C_QUICK if cfg == "quick" else C_FULL, work / "cutoff")


def run_impact(cfg, work: Path, shared: dict) -> dict:
    from bench.impact_bench import FULL as I_FULL, QUICK as I_QUICK, run_bench

    return run_bench(I_QUICK if cfg == "quick" else I_FULL, work / "impact")


def run_trace(cfg, work: Path, shared: dict) -> dict:
    from bench.trace_bench import run_bench

    return run_bench(cfg == "quick", work / "trace")


def run_chaos(cfg, work: Path, shared: dict) -> dict:
    from bench.chaos_bench import SCENARIOS, all_held, run_chaos as chaos

    res = chaos(cfg or SCENARIOS, work / "chaos")
    if not all_held(res):
        raise RuntimeError(f"a chaos scenario lost or changed data: {res['scenarios']}")
    return res


RUNNERS = {"throughput": run_throughput, "memory": run_memory, "detectors": run_detectors, "e2e": run_e2e,
           "curation": run_curation, "shift_audit": run_shift_audit, "api": run_api, "paraphrase": run_paraphrase,
           "canary": run_canary, "generation": run_generation, "cutoff": run_cutoff, "impact": run_impact,
           "trace": run_trace, "chaos": run_chaos}


if __name__ == "__main__":
    sys.exit(main())
