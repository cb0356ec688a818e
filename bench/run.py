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
           "generation", "chaos")

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
    summary = render_summary(results, errors, total, args)
    (out / "summary.md").write_text(summary)
    write_json(out, "run", {"benches": list(results), "errors": errors, "total_seconds": round(total, 1),
                            "quick": args.quick, "command": " ".join(sys.argv)})
    if not args.work:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    log(f"[bench] total {total:.1f} s; summary: {out / 'summary.md'}")
    return 1 if errors else 0


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


def run_chaos(cfg, work: Path, shared: dict) -> dict:
    from bench.chaos_bench import SCENARIOS, all_held, run_chaos as chaos

    res = chaos(cfg or SCENARIOS, work / "chaos")
    if not all_held(res):
        raise RuntimeError(f"a chaos scenario lost or changed data: {res['scenarios']}")
    return res


RUNNERS = {"throughput": run_throughput, "memory": run_memory, "detectors": run_detectors, "e2e": run_e2e,
           "curation": run_curation, "shift_audit": run_shift_audit, "api": run_api, "paraphrase": run_paraphrase,
           "canary": run_canary, "generation": run_generation, "chaos": run_chaos}


# ---- summary ----------------------------------------------------------------------------------------------------
def throughput_cell(r: dict) -> str:
    if "error" in r:
        return "failed: " + r["error"].split(":")[0]
    return f"{r['tokens_per_s']:,.0f} ({r['speedup_vs_reference_b1']:.2f}×)"


def _mb(x) -> str:
    return "—" if x is None else f"{x / 1e6:,.1f}"


def render_summary(results: dict, errors: dict, total: float, args) -> str:
    any_env = next((r["environment"] for r in results.values()), None)
    lines = ["# Tidemark benchmarks" + (" (quick sanity run)" if args.quick else ""), ""]
    if any_env:
        lines += [f"- device: {any_env['device_name']}; torch {any_env['torch']}, transformers "
                  f"{any_env['transformers']}; {any_env['torch_threads']} torch threads",
                  f"- when: {any_env['timestamp']}; commit {any_env['git']['commit']}"
                  + (" (with uncommitted changes)" if any_env["git"]["dirty"] else ""),
                  f"- command: `python -m bench.run {' '.join(sys.argv[1:])}`; total {total:.0f} s"]
        loads = [r["environment"]["load_average"] for r in results.values() if r["environment"]["load_average"]]
        cpus = any_env["cpu_count"] or 1
        if loads and max(l[0] for l in loads) > cpus:
            lines.append(f"- **measured under concurrent load**: 1-minute load average up to "
                         f"{max(l[0] for l in loads):.1f} on {cpus} CPUs; compare ratios within this run only")
        lines.append("")
    for name, err in errors.items():
        lines += [f"**{name} failed**: `{err}`", ""]
    if "throughput" in results:
        lines += ["## Scorer throughput (tokens/s; speed-up vs the batch-1 reference loop)", ""]
        for res in results["throughput"]["models"]:
            methods = list(res["cells"][0]["methods"])
            lines += [f"**{res['model']}** — {res['params'] / 1e6:.2f}M params, vocab {res['vocab']}, {res['dtype']}, "
                      f"best of {res['repeats']}; batch sizes: " + ", ".join(
                          f"{m}={res['cells'][0]['methods'][m]['batch_size']}" for m in methods), "",
                      "| length | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
            for c in res["cells"]:
                cell = c["cell"] if c["cell"] != "mixed" else (
                    f"mixed ({c['n_seqs']} seqs, median {c['length_median']:.0f}, max {c['length_max']})")
                lines.append(f"| {cell} | " + " | ".join(throughput_cell(c["methods"][m]) for m in methods) + " |")
            worst = max(r["max_abs_diff_vs_reference_first_seq"] for c in res["cells"] for r in c["methods"].values()
                        if "error" not in r)
            lines += ["", f"Largest |Δ| of any stat vs the reference loop (first sequence of each cell): {worst:.2e}",
                      ""]
        lines += ["Plot: `scorer_throughput.png`.", ""]
    if "memory" in results:
        mem = results["memory"]
        lines += ["## Peak memory of one micro-batch (MB above the weights; CPU, torch profiler)", "",
                  "| B × T | vocab | B×T×V fp32 | Tidemark peak | Tidemark largest tensor | naive padded peak |",
                  "|---|---|---|---|---|---|"]
        for m in mem["models"]:
            for r in m["rows"]:
                lines.append(f"| {r['batch']} × {r['length']} | {r['vocab']:,} | {_mb(r['btv_fp32_bytes'])} | "
                             f"{_mb(r['tidemark']['peak_bytes'])} | {_mb(r['tidemark']['largest_alloc_bytes'])} | "
                             + (_mb(r['naive_padded']['peak_bytes']) if 'peak_bytes' in r['naive_padded']
                                else r['naive_padded'].get('skipped', '—')) + " |")
        lines += ["", f"Tidemark never allocated a B×T×V fp32 tensor: **{mem['tidemark_never_allocated_btv_fp32']}**."]
        for f in mem["flatness"]:
            if "tidemark_peak_growth_over_those_vocabs" in f:
                lines.append(f"- B×T = {f['batch']}×{f['length']}: vocab ×{f['vocab_growth']} → Tidemark peak "
                             f"×{f['tidemark_peak_growth_over_those_vocabs']}")
        lines.append("")
    if "detectors" in results:
        d = results["detectors"]
        lines += ["## Single-pass detectors: all seven vs `loss` alone", "",
                  f"{d['texts']} passages, {d['tokens']:,} tokens, model {d['params'] / 1e6:.2f}M params, scorer batch "
                  f"{d['scorer_batch_size']}.", "",
                  "| | loss alone (s) | all seven (s) | ratio |", "|---|---|---|---|",
                  f"| Tidemark (one forward, shared token stats) | {d['tidemark']['loss_only_s']:.2f} | "
                  f"{d['tidemark']['all_s']:.2f} | **{d['ratio_all_vs_loss_tidemark']:.3f}×** (target ≤ 1.3×) |",
                  f"| research style (one batch-1 forward per metric) | {d['research_style']['loss_only_s']:.2f} | "
                  f"{d['research_style']['all_s']:.2f} | {d['ratio_all_vs_loss_research_style']:.2f}× |", "",
                  f"All seven: Tidemark {d['speedup_all_tidemark_vs_research_style']:.1f}× faster than research style. "
                  "Largest score difference between the two: "
                  f"{max(v for v in d['max_abs_score_diff_research_vs_tidemark'].values() if v is not None):.1e}.", ""]
    if "e2e" in results:
        e = results["e2e"]
        lines += ["## `tidemark evaluate` end to end vs a bare batch-1 loop", "",
                  f"{e['texts']} passages, {e['tokens']:,} tokens (mean {e['mean_tokens_per_text']}), "
                  f"{len(e['methods'])} detectors.", "",
                  "| | seconds | rows/s |", "|---|---|---|",
                  f"| `tidemark evaluate` (Ray start-up included) | {e['evaluate']['seconds']:.1f} | "
                  f"{e['evaluate']['rows_per_s']:.1f} |",
                  f"| bare batch-1 loop (load + loop; faster of the runs before and after evaluate: "
                  f"{' s, '.join(f'{x:.1f}' for x in e['bare_loop_b1'].get('runs_s', []))} s) | "
                  f"{e['bare_loop_b1']['total_s']:.1f} | "
                  f"{e['bare_loop_b1']['rows_per_s']:.1f} |",
                  f"| bare Tidemark scorer, no Ray | {e['bare_scorer']['total_s']:.1f} | "
                  f"{e['texts'] / e['bare_scorer']['total_s']:.1f} |", "",
                  f"Ratio evaluate / bare loop: **{e['ratio_evaluate_vs_bare_loop']:.2f}×** (target ≤ 2.5×); "
                  f"evaluate / bare scorer: {e['ratio_evaluate_vs_bare_scorer']:.2f}×.", ""]
        if e["evaluate"].get("phases_s"):
            lines += ["Where `evaluate`'s time went (`run.json: phases_s`; the blind baseline runs in a helper process "
                      "during scoring, so its row is only the wait for it):", "",
                      "| phase | seconds |", "|---|---|"]
            lines += [f"| {k} | {v:.2f} |" for k, v in e["evaluate"]["phases_s"].items()] + [""]
    if "curation" in results:
        c = results["curation"]
        lines += ["## Curation throughput (one core)", "", f"{c['note']}.", "",
                  "| step | posts | seconds | posts/s | questions/s |", "|---|---|---|---|---|"]
        for label, r in (("parse (both passes, HTML stripped)", c["parse"]),
                         ("parse + row-level filters", c["parse_and_filter"])):
            lines.append(f"| {label} | {r['posts']} | {r['seconds']:.3f} | {r['posts_per_s']:,.0f} | "
                         f"{r['questions_per_s']:,.0f} |")
        lines.append("")
    if "shift_audit" in results:
        s = results["shift_audit"]
        lines += ["## Blind-baseline shift audit", "", f"{s['benchmark']}; {s['rows']:,} rows in buckets "
                  f"{s['buckets']}; classifiers {', '.join(s['classifiers'] or [])}; {s['n_folds']} grouped folds, "
                  f"{s['n_bootstrap']} bootstrap resamples.", "",
                  f"Wall time **{s['seconds']:.1f} s** (target < {s['target_seconds']} s), {s['rows_per_s']:,.0f} rows/s; "
                  f"blind AUC {s['blind_auc_overall']:.3f} overall.", ""]
    if "api" in results:
        a = results["api"]
        lines += ["## Scoring a served model (loopback API)", "", f"{a['model']}; {a['server']}.", "",
                  "| method | concurrency | rows | rows/s | calls/token | tokens/call | max abs lp error |",
                  "|---|---|---|---|---|---|---|"]
        for r in a["runs"]:
            lines.append(f"| {r['method']} | {r['concurrency'] or '-'} | {r['rows']} | {r['rows_per_s']:,.2f} | "
                         f"{r.get('calls_per_token', '-')} | {r.get('tokens_per_call', '-')} | "
                         f"{r.get('max_abs_lp_error', 0):.1e} |")
        lines.append("")
    if "paraphrase" in results:
        lines += ["## The paraphrased setting (AUC)", "", results["paraphrase"]["table_md"]]
    if "canary" in results:
        from bench.canary_bench import markdown as canary_md

        lines += ["## The canary test: false positives under the null, power against repetitions", "",
                  canary_md(results["canary"])]
    if "generation" in results:
        from bench.generation_bench import markdown as generation_md

        lines += ["## Text-only audits: known membership, the null, throughput, cost", "",
                  generation_md(results["generation"])]
    if "chaos" in results:
        lines += ["## Node loss on a two-node Ray cluster", "",
                  "| scenario | fault at (s) | what the job did | seconds (clean) | lost | identical | counts |",
                  "|---|---|---|---|---|---|---|"]
        for name, r in results["chaos"]["scenarios"].items():
            if "skipped" in r:
                lines.append(f"| {name} | skipped: {r['skipped']} | | | | | |")
                continue
            lines.append(f"| {name} | {r['runs'][0]['fault_at_s']} | {r['outcome']} | {r['seconds']} "
                         f"({r['clean_seconds']}) | {r['seconds_lost']} | {r['identical_to_uninterrupted']} | "
                         f"{r['counts_reconcile']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
