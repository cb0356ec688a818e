"""Does `tidemark impact` measure the inflation that is there? (`make bench`'s `impact`; also
`python -m bench.impact_bench --out DIR [--quick]`)

A controlled study (jobs/kit/impact_study.py): tiny GPT-2s learn a synthetic word-problem task (addition of numbers
up to 20; the reference benchmark a synthetic sibling: new problems, same phrasing); the `target` also trains on half of the benchmark's items verbatim, its `twin` on the same task without
them (same steps and seed: the target's score had nothing leaked), and reference models train on the task alone for
several step counts. Every model's per-item answers are written as lm-evaluation-harness --log_samples files;
`tidemark overlap` of the benchmark's questions against the target's training text is the evidence; the real
`tidemark impact` measures:
1. the target: the leaked-minus-clean gap and its difference-in-differences against the truth (the leaked items'
   gain over the twin), the clean score against the twin's score; ConStat's inflation and p;
2. the twin (no contamination): the gap, the difference-in-differences (near zero), ConStat's p;
3. the difficulty confound: the easy items (they add 0: the answer is in the question) "leaked" (a corpus holding
   their questions, which no model trained on): the twin's gap is the items' ease, and the
   difference-in-differences removes it;
4. ConStat under the null: the twin as target on re-drawn halves of both benchmarks' items: the share of p < 0.05.
What it cannot say: how a real model's contamination generalises, nor how close a real reference benchmark is.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FULL = {"n_bench": 300, "n_reference": 300, "n_train": 3000, "repeats": 40, "steps": 600,
        "reference_steps": (300, 450, 600, 800, 1000, 1200), "redraws": 300, "bootstrap": 2000,
        "constat_bootstrap": 1000}
QUICK = {"n_bench": 100, "n_reference": 100, "n_train": 3000, "repeats": 40, "steps": 600,
         "reference_steps": (300, 600, 1000), "redraws": 60, "bootstrap": 1000, "constat_bootstrap": 500}
ROOT = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[impact-bench] {msg}", file=sys.stderr, flush=True)


def cli(*args: str) -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "jobs.cli", *args, "--quiet"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"tidemark {args[0]} failed: {done.stderr[-3000:]}")


def impact(study: dict, models: list[str], evidence: str, out: Path, cfg: dict) -> dict:
    from jobs.kit.impact_study import REFERENCE_TASK

    res = Path(study["results"])
    refs = [m for m in sorted(p.name for p in res.iterdir()) if m.startswith("ref-")]
    args = ["impact", "--out", str(out), "--evidence", evidence, "--runner", "local", "--bootstrap",
            str(cfg["bootstrap"]), "--constat-bootstrap", str(cfg["constat_bootstrap"]),
            "--reference-benchmark-results", study["reference_results"], "--task-map",
            f"word_problems={REFERENCE_TASK}"]
    for m in models:
        args += ["--results", str(res / m)]
    for r in refs:
        args += ["--reference-results", str(res / r)]
    cli(*args)
    return {r["model"]: r for r in json.loads((out / "report.json").read_text())["tasks"]}


def covers(ci, x) -> bool:
    return bool(ci) and ci[0] <= x <= ci[1]


def constat_null(truth: dict, cfg: dict) -> dict:
    """The twin as ConStat's target on re-drawn halves of both benchmarks' items."""
    from scoring.impact.constat import constat

    models = truth["models"]
    refs = [m for m in models if m.startswith("ref-")]
    bench = {m: np.asarray(v["bench"], float) for m, v in models.items()}
    ref = {m: np.asarray(v["reference"], float) for m, v in models.items()}
    rng = np.random.default_rng(7)
    ps, extrapolated = [], 0
    for k in range(cfg["redraws"]):
        bi = rng.choice(len(bench["twin"]), len(bench["twin"]) // 2, replace=False)
        ri = rng.choice(len(ref["twin"]), len(ref["twin"]) // 2, replace=False)
        c = constat({m: bench[m][bi] for m in ["twin", *refs]}, {m: ref[m][ri] for m in ["twin", *refs]}, "twin",
                    refs, n_boot=300, seed=k)
        ps.append(c["p_value"])
        extrapolated += bool(c["extrapolated"])
    ps = np.asarray(ps)
    from scoring.stats.proportions import wilson_ci

    return {"sets": int(ps.size), "p_below_0.05": float((ps < 0.05).mean()),
            "p_below_0.05_ci": [round(x, 4) for x in wilson_ci(int((ps < 0.05).sum()), ps.size)],
            "extrapolated_sets": extrapolated}


def run_bench(cfg: dict, work: Path) -> dict:
    from jobs.kit.impact_study import build_impact_study

    t0 = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    log("training the study's models ...")
    study = build_impact_study(work / "study", steps=cfg["steps"], reference_steps=cfg["reference_steps"],
                               n_bench=cfg["n_bench"], n_reference=cfg["n_reference"], n_train=cfg["n_train"],
                               repeats=cfg["repeats"])
    truth = study["truth"]
    log(f"truth: {truth['true']}")
    ov = work / "overlap"
    cli("overlap", "--benchmark", study["bench"], "--benchmark-field", "question", "--corpus", study["corpus"],
        "--out", str(ov))
    measured = impact(study, ["target", "twin"], str(ov), work / "impact", cfg)
    # the difficulty confound: a corpus holding the easy items' questions, which no model trained on
    items = [json.loads(x) for x in Path(study["bench"]).read_text().splitlines()]
    easy = [i for i in items if i["easy"]]  # they add 0: the answer is in the question
    easy_corpus = work / "easy_corpus.jsonl"
    easy_corpus.write_text("".join(json.dumps({"id": f"e{k}", "text": i["question"]}) + "\n"
                                   for k, i in enumerate(easy)))
    cli("overlap", "--benchmark", study["bench"], "--benchmark-field", "question", "--corpus", str(easy_corpus),
        "--out", str(work / "overlap_easy"))
    confound = impact(study, ["twin"], str(work / "overlap_easy"), work / "impact_easy", cfg)["twin"]
    t = truth["true"]
    target, twin = measured["target"], measured["twin"]
    keys = ("full_score", "clean_score", "clean_ci", "gap", "gap_ci", "p_value", "did", "did_ci", "reference_gap",
            "constat_inflation", "constat_ci", "constat_p", "n_leaked", "n_clean")
    return {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
            "truth": t, "accuracy": {m: {"bench": float(np.mean(v["bench"])), "reference": float(np.mean(v["reference"]))}
                                     for m, v in truth["models"].items()},
            "target": {k: target.get(k) for k in keys}, "twin": {k: twin.get(k) for k in keys},
            "confound": {k: confound.get(k) for k in keys},
            "checks": {"did_ci_covers_true_gain": covers(target.get("did_ci"), t["gain_on_leaked"]),
                       "constat_ci_covers_true_full_gain": covers(target.get("constat_ci"),
                                                                  t["target_full"] - t["twin_full"]),
                       "constat_target_p_below_0.05": (target.get("constat_p") or 1.0) < 0.05,
                       "constat_twin_p_not_below_0.05": (twin.get("constat_p") or 0.0) >= 0.05,
                       "target_clean_ci_covers_twin_full": covers(target.get("clean_ci"), t["twin_full"]),
                       "twin_did_ci_covers_0": covers(twin.get("did_ci"), 0.0),
                       "confound_did_ci_covers_0": covers(confound.get("did_ci"), 0.0)},
            "constat_null": constat_null(truth, cfg), "seconds": round(time.perf_counter() - t0, 1)}


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _p(p) -> str:
    return "-" if p is None else f"{p:.2g}"


def _ci(ci) -> str:
    return "-" if not ci else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def markdown(res: dict) -> str:
    cfg, t = res["config"], res["truth"]
    lines = [f"Known truth: tiny GPT-2s on a synthetic addition task ({cfg['n_bench']} benchmark items, "
             f"{cfg['n_reference']} items of a synthetic sibling as the reference benchmark); the target trained {cfg['steps']} steps with half the "
             f"items verbatim ({cfg['repeats']}x), its twin the same without them, references at "
             f"{', '.join(map(str, cfg['reference_steps']))} steps. Scores are exact-match accuracy, in points.", "",
             f"- truth: the leaked items' gain over the twin {_pct(t['gain_on_leaked'])} points (target "
             f"{_pct(t['target_leaked'])}% vs twin {_pct(t['twin_leaked'])}% on them); on the whole benchmark the "
             f"target scores {_pct(t['target_full'])}% against the twin's {_pct(t['twin_full'])}% (the inflation "
             f"ConStat should find: {_pct(t['target_full'] - t['twin_full'])} points)",
             "", "| model | full | clean [CI] | gap [CI] | p | DiD [CI] | ConStat inflation [CI] | ConStat p |",
             "|---|---|---|---|---|---|---|---|"]
    for name in ("target", "twin", "confound"):
        r = res[name]
        label = "twin, the easy items 'leaked'" if name == "confound" else name
        lines.append(f"| {label} | {_pct(r['full_score'])} | {_pct(r['clean_score'])} {_ci(r['clean_ci'])} | "
                     f"{_pct(r['gap'])} {_ci(r['gap_ci'])} | {_p(r['p_value'])} | {_pct(r['did'])} {_ci(r['did_ci'])} "
                     f"| {_pct(r['constat_inflation'])} {_ci(r['constat_ci'])} | {_p(r['constat_p'])} |")
    n = res["constat_null"]
    lines += ["", "Checks: " + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in res["checks"].items()), "",
              f"ConStat under the null (the twin as target on {n['sets']} re-drawn halves of both benchmarks): p < 0.05 in "
              f"{n['p_below_0.05']:.3f} [{n['p_below_0.05_ci'][0]:.3f}, {n['p_below_0.05_ci'][1]:.3f}] "
              f"({n['extrapolated_sets']} sets had the twin outside the references' range)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.impact_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default="/tmp/tidemark-impact-bench")
    args = ap.parse_args(argv)
    from bench.common import environment, load_average, write_json

    env = environment("cpu")
    res = run_bench(QUICK if args.quick else FULL, Path(args.work))
    out = Path(args.out)
    write_json(out, "impact", {"name": "impact", "quick": args.quick, "environment": env,
                               "load_average_after": load_average(), **res})
    (out / "impact.md").write_text(markdown(res))
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
