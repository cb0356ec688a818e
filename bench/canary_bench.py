"""Does the canary test keep its promise? (`make bench`'s `canary`; also `python -m bench.canary_bench --out DIR`)

1. False-positive rate under the null. A pool of canaries (`canary make`) is scored with `tidemark canary test`
   under models that never saw them: a tiny GPT-2 trained on the background text only, and those trained with
   *other* canaries of the same generator planted (the power models below). The roles are then re-drawn 1,000 times
   with `canary make`'s own coin (curation/canary.draw_roles, seeds 0..999) and the test rerun on the same scores:
   the share of p < 0.05 and p < 0.01, with Wilson 95% intervals, for the whole pool (the asymptotic test; also with
   10,000 splits, for a tighter interval) and for sets of 40 drawn from it (the exact test).
2. Power. Tiny GPT-2s trained on the background plus, for every (repetitions r, canary length L), `sets_per_cell`
   independent sets whose planted canaries appear r times in the corpus; one `canary test` run per model scores
   every set. Power is the share of sets with p < 0.05 (and < 0.01); the median AUC is given too. A canary is seen
   r × epochs times in training: the model trains for `epochs` passes over its corpus.
Every model is trained here, on CPU, in seconds; every test is the real `tidemark canary test` (a subprocess with its own local Ray); the sets are
written by `canary make`'s functions.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

FULL = {"background": 1000, "background_words": 128, "repetitions": (1, 2, 4, 8, 16), "lengths": (8, 16, 32),
        "sets_per_cell": 3, "canaries_per_set": 20, "models": 2, "epochs": 3, "pool": 1000, "splits": 1000,
        "long_splits": 10_000, "small_set": 40}
QUICK = {"background": 300, "background_words": 128, "repetitions": (1, 4, 16), "lengths": (16,), "sets_per_cell": 2,
         "canaries_per_set": 20, "models": 1, "epochs": 3, "pool": 200, "splits": 200, "long_splits": 1000,
         "small_set": 40}


def log(msg: str) -> None:
    print(f"[canary-bench] {msg}", file=sys.stderr, flush=True)


def wilson(k: int, n: int, z: float = 1.96) -> list[float]:
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [round(float(c - h), 4), round(float(c + h), 4)]


def redrawn_null(scores: np.ndarray, splits: int, plant_share: float = 0.5, subset: int | None = None) -> dict:
    """p-values of the test on `scores` (of canaries no model saw) under `splits` role assignments drawn by
    `canary make`'s coin with seeds 0.., each on all scores or on a seeded subset of `subset` of them."""
    from curation.canary import draw_roles
    from scoring.stats.rank_test import planted_vs_holdout

    ps, methods = [], set()
    for seed in range(splits):
        rng = random.Random(seed)
        x = scores if subset is None else scores[rng.sample(range(scores.size), subset)]
        roles = np.asarray(draw_roles(x.size, rng, plant_share))
        res = planted_vs_holdout(x[roles == "plant"], x[roles == "holdout"])
        ps.append(res["p_value"])
        methods.add(res["method"])
    ps = np.asarray(ps)
    out = {"splits": splits, "set_size": int(x.size), "method": sorted(methods),
           "p_values": ps.round(6).tolist() if splits <= 1000 else "(not kept)"}
    for alpha in (0.05, 0.01):
        k = int((ps < alpha).sum())
        out[f"share_p_below_{alpha}"] = round(k / splits, 4)
        out[f"share_p_below_{alpha}_ci95"] = wilson(k, splits)
    return out


def _train(texts: list[str], tokenizer_texts: list[str], out: Path, epochs: int, seed: int) -> dict:
    from jobs.kit.studies import train_tiny_gpt2
    from scoring.studies.contamination import epoch_steps

    # steps for `epochs` passes: the tokenizer is trained first (a 1-step model), then the real run
    probe = train_tiny_gpt2(tokenizer_texts[:50], out / "_probe", tokenizer_texts=tokenizer_texts, steps=1, seed=seed)
    steps = epochs * epoch_steps(probe["path"], texts, context=256, batch_size=16)
    return train_tiny_gpt2(texts, out, tokenizer_texts=tokenizer_texts, steps=steps, seed=seed)


def run_bench(cfg: dict, work: Path) -> dict:
    from bench.paraphrase_study import tidemark  # the real CLI in a subprocess with its own local Ray
    from curation.canary import load_canaries
    from scoring.studies.known_membership import sotu_passages

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    background = [p["text"] for p in sotu_passages(cfg["background_words"], cfg["background"], seed=0)]
    seed = 1000
    cells = []  # (repetitions, length, set directory)
    for r in cfg["repetitions"]:
        for length in cfg["lengths"]:
            for _ in range(cfg["sets_per_cell"]):
                d = work / "sets" / f"r{r}-w{length}-s{seed}"
                tidemark_make(d, cfg["canaries_per_set"], seed, length)
                cells.append((r, length, d))
                seed += 1
    pool = work / "sets" / "pool"
    tidemark_make(pool, cfg["pool"], 7, 16)

    models = [("background only", work / "m-null", background, background)]
    for m in range(cfg["models"]):
        texts, planted = list(background), []
        for r, _, d in cells:
            plant = [c["text"] for c in load_canaries(d)[0] if c["role"] == "plant"]
            planted += plant
            texts += plant * r
        random.Random(m).shuffle(texts)
        models.append((f"planted #{m}", work / f"m-planted-{m}", texts, background + planted))
    trained, tests = {}, {}
    for name, path, texts, tok_texts in models:
        rec = _train(texts, tok_texts, path, cfg["epochs"], seed=len(trained))
        trained[name] = {k: rec[k] for k in ("steps", "seconds", "epochs", "final_loss", "params", "tokens_per_epoch")}
        log(f"trained {name}: {trained[name]}")
        out = work / f"test-{path.name}"
        sets = [pool] + ([d for _, _, d in cells] if name != "background only" else [])
        args = [x for d in sets for x in ("--canaries", str(d))]
        secs = tidemark("canary", "test", *args, "--model", str(path), "--out", str(out))
        tests[name] = {"seconds": secs, "report": json.loads((out / "report.json").read_text()), "out": out}
        log(f"canary test under {name}: {secs} s")

    null = {}
    import pyarrow.parquet as pq

    for name, t in tests.items():
        s = pq.read_table(t["out"] / "scores.parquet").to_pydict()
        x = np.asarray([v for v, st in zip(s["score"], s["set"]) if st == "pool"], dtype=float)
        null[name] = {"pool_p_value_as_made": t["report"]["sets"]["pool"]["p_value"],
                      "whole_pool": redrawn_null(x, cfg["splits"]),
                      # 1,000 splits measure a 5% rate to +-1.4 points; 10,000 (seconds of rank tests) to +-0.4
                      "whole_pool_%d_splits" % cfg["long_splits"]: redrawn_null(x, cfg["long_splits"]),
                      "sets_of_%d" % cfg["small_set"]: redrawn_null(x, cfg["splits"], subset=cfg["small_set"])}
        log(f"null under {name}: " + ", ".join(
            f"{k}: p<0.05 in {v['share_p_below_0.05']:.3f}" for k, v in null[name].items() if isinstance(v, dict)))

    power = []
    for r in cfg["repetitions"]:
        for length in cfg["lengths"]:
            ps, aucs = [], []
            for name, t in tests.items():
                if name == "background only":
                    continue
                for rr, ll, d in cells:
                    if (rr, ll) == (r, length):
                        s = t["report"]["sets"][d.name]
                        ps.append(s["p_value"])
                        aucs.append(s["auc"])
            ps = np.asarray(ps)
            power.append({"repetitions": r, "words": length, "seen_in_training": r * cfg["epochs"],
                          "sets": int(ps.size), "power_p_below_0.05": round(float((ps < 0.05).mean()), 3),
                          "power_p_below_0.01": round(float((ps < 0.01).mean()), 3),
                          "median_p": float(np.median(ps)), "median_auc": round(float(np.median(aucs)), 3)})
    return {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}, "models": trained,
            "test_seconds": {k: v["seconds"] for k, v in tests.items()}, "null": null, "power": power,
            "seconds": round(time.perf_counter() - t0, 1)}


def tidemark_make(out: Path, n: int, seed: int, words: int) -> None:
    """A set as `canary make` writes it (its own functions, without a process per set)."""
    import shutil

    from curation.canary import make_canaries, write_canaries

    shutil.rmtree(out, ignore_errors=True)
    write_canaries(out, make_canaries(n, seed, words), seed=seed, words=words, plant_share=0.5, tool="bench")


def plot(res: dict, path: Path) -> None:
    from scoring.reports.figures import png_bytes, pyplot

    plt = pyplot()
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4))
    for length, style in zip(res["config"]["lengths"], ("o-", "s--", "^:", "d-.")):
        rows = [p for p in res["power"] if p["words"] == length]
        x = [p["repetitions"] for p in rows]
        a.plot(x, [p["power_p_below_0.05"] for p in rows], style, label=f"{length} words", alpha=0.85)
        b.plot(x, [p["median_auc"] for p in rows], style, label=f"{length} words", alpha=0.85)
    for ax, what in ((a, "power (share of sets with p < 0.05)"), (b, "median AUC, planted vs held out")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"repetitions in the training corpus (× {res['config']['epochs']} epochs)")
        ax.set_ylabel(what)
        ax.legend(fontsize=8)
    a.set_ylim(-0.03, 1.03)
    b.axhline(0.5, color="grey", lw=0.8, ls=":")
    bins = np.linspace(0, 1, 21)
    for name, v in res["null"].items():
        key = "sets_of_%d" % res["config"]["small_set"]
        c.hist(v[key]["p_values"], bins=bins, histtype="step", lw=1.5,
               label=f"{name}: p<0.05 in {v[key]['share_p_below_0.05']:.1%}")
    c.axhline(v[key]["splits"] / 20, color="grey", lw=0.8, ls=":")
    c.set_xlabel(f"p-value, {res['config']['splits']} re-drawn splits of {res['config']['small_set']} unseen "
                 "canaries")
    c.set_ylabel("splits")
    c.legend(fontsize=8)
    c.set_title("Under the null: p is uniform", fontsize=10)
    a.set_title("Power of the canary test (loss, tiny GPT-2)", fontsize=10)
    fig.tight_layout()
    path.write_bytes(png_bytes(fig))


def markdown(res: dict) -> str:
    cfg = res["config"]
    lines = [f"False-positive rate under the null ({cfg['splits']} re-drawn role assignments of a pool of "
             f"{cfg['pool']} canaries scored by models that never saw them; Wilson 95% intervals):", "",
             "| model | test on | method | share p < 0.05 | share p < 0.01 |", "|---|---|---|---|---|"]
    for name, v in res["null"].items():
        for key, r in v.items():
            if isinstance(r, dict):
                lines.append(f"| {name} | {key.replace('_', ' ')} | {', '.join(r['method'])} | "
                             f"{r['share_p_below_0.05']:.3f} [{r['share_p_below_0.05_ci95'][0]:.3f}, "
                             f"{r['share_p_below_0.05_ci95'][1]:.3f}] | {r['share_p_below_0.01']:.3f} "
                             f"[{r['share_p_below_0.01_ci95'][0]:.3f}, {r['share_p_below_0.01_ci95'][1]:.3f}] |")
    lines += ["", f"Power against repetitions ({cfg['models']} tiny GPT-2 model(s) × {cfg['sets_per_cell']} sets of "
              f"{cfg['canaries_per_set']} canaries per cell, half planted; {cfg['epochs']} epochs; detector loss):",
              "", "| repetitions | words | sets | power (p < 0.05) | power (p < 0.01) | median p | median AUC |",
              "|---|---|---|---|---|---|---|"]
    for p in res["power"]:
        lines.append(f"| {p['repetitions']} | {p['words']} | {p['sets']} | {p['power_p_below_0.05']:.2f} | "
                     f"{p['power_p_below_0.01']:.2f} | {p['median_p']:.2g} | {p['median_auc']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.canary_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default="/tmp/tidemark-canary-bench")
    args = ap.parse_args(argv)
    from bench.common import environment, load_average, write_json

    env = environment("cpu")
    res = run_bench(QUICK if args.quick else FULL, Path(args.work))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out, "canary", {"name": "canary", "quick": args.quick, "environment": env,
                               "load_average_after": load_average(), **res})
    (out / "canary.md").write_text(markdown(res))
    plot(res, out / "canary.png")
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
