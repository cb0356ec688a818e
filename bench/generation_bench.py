"""Text-only audits, measured (`make bench`'s `generation`; also `python -m bench.generation_bench --out DIR`).

1. Known membership. A tiny GPT-2 trained here until it partly memorises its members (real 64-word State of the
   Union passages, repeated), served by the loopback server with sampling and no log-probabilities; the real
   `tidemark evaluate --api-logprobs none` (a subprocess with its own local Ray) scores members against held-out
   passages of the same source, over /v1/completions and over /v1/chat/completions: AUC with its bootstrap CI per
   detector. The same benchmark under a model that saw neither half (trained on other passages) is the null: the
   set test (`--set-test ngram_coverage`) rerun on `splits` random halvings of its scores gives the false-positive
   rate at 5% and 1% (Wilson intervals).
2. Throughput (bench/generation_throughput.py): requests/s, rows/s, tokens per row.
3. Cost: requests and tokens per 1,000 rows for each method, from the plan (scoring/generation/plan.py) counted
   with SmolLM2's tokenizer on passages of 32-256 words, with `n` honoured and not; beside it, the generated tokens
   the study's runs actually spent.
What it cannot say: how a real hosted model reproduces its training data (the model here is tiny and memorises
by repetition), nor a hosted API's latency and rate limits (the throughput section simulates a round trip).
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

FULL = {"members": 60, "words": 64, "repeats": 20, "steps": 900, "samples": 10, "splits": 1000,
        "throughput_rows": 60, "throughput_samples": 5, "concurrency": (1, 4, 8), "latency_s": (0.0, 0.25),
        "cost_rows": 200}
QUICK = {"members": 24, "words": 48, "repeats": 20, "steps": 150, "samples": 5, "splits": 200,
         "throughput_rows": 20, "throughput_samples": 3, "concurrency": (1, 8), "latency_s": (0.25,),
         "cost_rows": 50}
from bench.loopback_runs import DETECTORS, ROOT, evaluate, log, serve  # noqa: F401 - shared with the throughput bench


def train(texts: list[str], tokenizer_texts: list[str], out: Path, steps: int) -> dict:
    from jobs.kit.studies import train_tiny_gpt2

    return train_tiny_gpt2(texts, out, tokenizer_texts=tokenizer_texts, steps=steps, seed=0, vocab_size=1000,
                           context=128, positions=512)


def null_rate(scores: np.ndarray, splits: int) -> dict:
    """The set test on random halvings of scores from sets the model never saw: how often p < 0.05 and < 0.01."""
    from scoring.stats.proportions import wilson_ci
    from scoring.stats.rank_test import planted_vs_holdout

    ps = []
    for seed in range(splits):
        order = random.Random(seed).sample(range(scores.size), scores.size)
        half = scores.size // 2
        ps.append(planted_vs_holdout(scores[order[:half]], scores[order[half:]])["p_value"])
    ps = np.asarray(ps)
    out = {"splits": splits, "rows": int(scores.size)}
    for alpha in (0.05, 0.01):
        k = int((ps < alpha).sum())
        out[f"p_below_{alpha}"] = round(k / splits, 4)
        out[f"p_below_{alpha}_ci"] = [round(x, 4) for x in wilson_ci(k, splits)]
    return out


def study(cfg: dict, work: Path) -> dict:
    from bench.workspace import passages

    pool = passages(3 * cfg["members"], cfg["words"], seed=11)
    members, held, other = (pool[:cfg["members"]], pool[cfg["members"]:2 * cfg["members"]],
                            pool[2 * cfg["members"]:])
    bench = work / "bench.jsonl"
    with open(bench, "w") as fh:
        for label, group in ((1, members), (0, held)):
            for p in group:
                fh.write(json.dumps({"id": p["id"], "input": p["text"], "label": label}) + "\n")
    tok_texts = [p["text"] for p in pool]
    log(f"training the memorising model ({cfg['members']} members x {cfg['repeats']}, {cfg['steps']} steps)")
    seen = train([p["text"] for p in members] * cfg["repeats"], tok_texts, work / "seen", cfg["steps"])
    log("training the model that saw neither half")
    unseen = train([p["text"] for p in other] * cfg["repeats"], tok_texts, work / "unseen", cfg["steps"])
    runs = {}
    for name, model, extra in (("completions", seen, ()), ("chat", seen, ("--api-chat",)),
                               ("never_saw", unseen, ())):
        proc, url = serve(model["path"])
        try:
            log(f"evaluate over {name}")
            runs[name] = evaluate(url, bench, work / f"out_{name}", cfg["samples"], *extra)
        finally:
            proc.kill()
    import pyarrow.parquet as pq

    null_scores = pq.read_table(work / "out_never_saw" / "scores.parquet")
    null = {c: null_rate(null_scores.column(c).to_numpy(), cfg["splits"]) for c in runs["never_saw"]["metrics"]}
    return {"models": {"seen": {k: seen[k] for k in ("steps", "final_loss", "params", "seconds")},
                       "never_saw": {k: unseen[k] for k in ("steps", "final_loss", "params", "seconds")}},
            "rows": 2 * cfg["members"], "words": cfg["words"], "samples": cfg["samples"], "runs": runs,
            "null": null}


def cost(cfg: dict) -> dict:
    """Requests and tokens per 1,000 rows per method (the plan, counted with SmolLM2's tokenizer)."""
    from bench.workspace import passages
    from scoring.detectors.base import parse_methods
    from scoring.generation.kinds import Settings
    from scoring.generation.plan import plan_rows
    from scoring.lm.model import load_tokenizer

    tok = load_tokenizer(str(ROOT / "tests" / "fixtures" / "llama_cpp" / "tokenizer"))
    count = lambda t: len(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    out = {}
    for words in (32, 64, 128, 256):
        rows = [(p["id"], p["text"]) for p in passages(cfg["cost_rows"], words, seed=5)]
        for method in ("ngram_coverage", "decop", "name_cloze"):
            kinds = parse_methods(method, input="generations")[0].needs
            for n_ok in (True, False):
                plan = plan_rows(rows, kinds, Settings(n_ok=n_ok), count)
                scale = 1000 / len(rows)
                out[f"{method}|{words}|{'n' if n_ok else 'no n'}"] = {
                    "requests": round(plan["requests"] * scale), "prompt_tokens": round(plan["prompt_tokens"] * scale),
                    "generated_tokens_max": round(plan["completion_tokens"] * scale)}
    return out


def run_bench(cfg: dict, work: Path) -> dict:
    from bench.common import environment
    from bench.generation_throughput import throughput

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    res = {"config": cfg, "environment": environment("cpu"), "study": study(cfg, work)}
    res["throughput"] = throughput(cfg, work, str(work / "seen"))
    res["cost_per_1000_rows"] = cost(cfg)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def markdown(res: dict) -> str:
    s = res["study"]
    lines = [f"Known membership: {s['rows']} real {s['words']}-word passages (half members, repeated in training), "
             f"{s['samples']} samples each; AUC [95% CI].", "",
             "| run | " + " | ".join(DETECTORS.split(",")) + " | set test p | requests | generated tokens | s |",
             "|---|" + "---|" * (len(DETECTORS.split(",")) + 4)]
    for name, r in s["runs"].items():
        cells = [f"{m['auc']:.3f} [{m['auc_ci'][0]:.2f}, {m['auc_ci'][1]:.2f}]" for m in r["metrics"].values()]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {r['set_test']['p_value']:.2g} | "
                     f"{r['spent']['requests_sent']:,} | {r['spent']['completion_tokens']:,} | {r['seconds']} |")
    lines += ["", "The set test under the null: the model that saw neither half, its scores split into random halves "
                  "(suspect vs reference), the one-sided rank test rerun on each split:", "",
              "| detector | splits | p < 0.05 [95% CI] | p < 0.01 [95% CI] |", "|---|---|---|---|"]
    for column, nl in s["null"].items():
        lines.append(f"| {column} | {nl['splits']:,} | {100 * nl['p_below_0.05']:.1f}% "
                     f"[{100 * nl['p_below_0.05_ci'][0]:.1f}, {100 * nl['p_below_0.05_ci'][1]:.1f}] | "
                     f"{100 * nl['p_below_0.01']:.1f}% [{100 * nl['p_below_0.01_ci'][0]:.1f}, "
                     f"{100 * nl['p_below_0.01_ci'][1]:.1f}] |")
    lines.append("")
    from bench.generation_throughput import markdown as throughput_md

    lines += throughput_md(res["throughput"])
    lines += ["", "Cost per 1,000 rows (plan, SmolLM2 tokenizer; generated tokens at their max):", "",
              "| method | words | server | requests | prompt tokens | generated tokens (max) |",
              "|---|---|---|---|---|---|"]
    for key, c in res["cost_per_1000_rows"].items():
        method, words, n = key.split("|")
        lines.append(f"| {method} | {words} | {n} | {c['requests']:,} | {c['prompt_tokens']:,} | "
                     f"{c['generated_tokens_max']:,} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--work", default="/tmp/tidemark-generation-bench")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    from bench.common import write_json

    res = run_bench(QUICK if args.quick else FULL, Path(args.work))
    write_json(args.out, "generation", res)
    (Path(args.out) / "generation.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
