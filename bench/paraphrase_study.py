"""The paraphrased setting on the known-membership study: every detector's AUC on the original benchmark and on
paraphrased copies (WordNet synonyms; a masked LM's fill-in), the table in README.

  python -m bench.paraphrase_study --out bench/results        # ~5 minutes on 2 cores; also `make bench`

Steps, each the real CLI as a subprocess (its own local Ray):
  1. the tiny-GPT-2 known-membership study (scoring/studies/known_membership.py): 100 member + 100 non-member SOTU
     passages at 64 and 128 words, a fixed number of training steps; a tiny BERT MLM trained on the same pool
     (it plays the off-the-shelf MLM: it saw members and non-members alike);
  2. `tidemark evaluate --methods all --neighbour-model MLM` on the original;
  3. `tidemark paraphrase --rate R` with each rewriter, then `tidemark evaluate ... --compare-to <step 2's OUT>`.
Results: <out>/paraphrase.json (AUCs, the measured share of words changed, the commands) and paraphrase.md.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

FULL = {"n_per_label": 100, "buckets": (64, 128), "steps": 300, "rate": 0.2, "mlm_seconds": 20.0}
QUICK = {"n_per_label": 20, "buckets": (64,), "steps": 100, "rate": 0.2, "mlm_seconds": 4.0}


def log(msg: str) -> None:
    print(f"[paraphrase-study] {msg}", file=sys.stderr, flush=True)


def tidemark(*args: str) -> float:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("HF_HUB_OFFLINE", "1")
    cmd = [str(Path(sys.executable).parent / "tidemark"), *args, "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:1])} failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return round(time.perf_counter() - t0, 1)


def run_study(cfg: dict, work: Path) -> dict:
    from scoring.studies.known_membership import sotu_passages
    from jobs.kit.studies import build_known_membership
    from jobs.kit.studies import train_tiny_mlm

    work.mkdir(parents=True, exist_ok=True)
    study = build_known_membership(work / "study", n_per_label=cfg["n_per_label"], buckets=cfg["buckets"],
                                   repeats=3, steps=cfg["steps"], seed=0)
    pool = [p["text"] for p in sotu_passages(max(cfg["buckets"]), 2 * cfg["n_per_label"], seed=0)]
    mlm = train_tiny_mlm(pool, work / "mlm", seconds=cfg["mlm_seconds"], context=128)
    common = ["--model", study["model"], "--methods", "all", "--neighbour-model", mlm["path"]]
    original = work / "eval-original"
    seconds = {"original": tidemark("evaluate", "--benchmark", study["benchmark"], "--out", str(original), *common)}
    log(f"original evaluated in {seconds['original']} s")
    variants, shares = {}, {}
    for name, rewriter in (("wordnet", "wordnet"), ("mlm", f"mlm:{mlm['path']}")):
        para = work / f"para-{name}"
        seconds[f"paraphrase {name}"] = tidemark("paraphrase", "--benchmark", study["benchmark"], "--out", str(para),
                                                 "--rate", str(cfg["rate"]), "--rewriter", rewriter, "--seed", "0")
        shares[name] = json.loads((para / "manifest.json").read_text())
        out = work / f"eval-{name}"
        seconds[f"evaluate {name}"] = tidemark("evaluate", "--benchmark", str(para), "--out", str(out), *common,
                                               "--compare-to", str(original))
        variants[name] = json.loads((out / "metrics.json").read_text())
        log(f"{name}: paraphrased and evaluated ({seconds[f'paraphrase {name}']} + {seconds[f'evaluate {name}']} s)")
    table = {}
    for name, records in variants.items():
        for r in records:
            if r["bucket"] != "all":
                continue
            row = table.setdefault(r["column"], {"original": r["original_auc"]})
            row[name] = r["auc"]
    return {"settings": {**cfg, "buckets": list(cfg["buckets"]), "mlm": mlm, "train": study["train"]},
            "auc_all": table, "paraphrase_manifests": {k: _share(v) for k, v in shares.items()},
            "seconds": seconds}


def _share(manifest: dict) -> dict:
    keep = ("rewriter", "rate", "seed", "measured", "counts")
    return {k: manifest[k] for k in keep if k in manifest}


def markdown(res: dict) -> str:
    s = res["settings"]
    shares = res["paraphrase_manifests"]
    lines = [f"Known-membership study: tiny GPT-2, {s['n_per_label']} + {s['n_per_label']} SOTU passages at "
             f"{'/'.join(map(str, s['buckets']))} words, members seen 3x ({s['steps']} steps); paraphrase rate "
             f"{s['rate']}; neighbour MLM: a tiny BERT trained {s['mlm']['seconds']} s on the same pool. AUC over all "
             "buckets.", "",
             "| detector | original | WordNet-paraphrased | MLM-paraphrased |", "|---|---|---|---|"]
    for col, row in sorted(res["auc_all"].items(), key=lambda kv: -(kv[1].get("original") or 0)):
        cells = [row.get(k) for k in ("original", "wordnet", "mlm")]
        lines.append(f"| {col} | " + " | ".join("n/a" if c is None or c != c else f"{c:.3f}" for c in cells) + " |")
    lines += ["", "Measured share of content words changed (each output's manifest.json): " +
              "; ".join(f"{k} {100 * v['measured']['changed_over_content_words']:.1f}%" for k, v in shares.items())]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.paraphrase_study", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--work", default=None)
    args = ap.parse_args(argv)
    from bench.common import environment, write_json

    work = Path(args.work or Path(args.out) / "_paraphrase_work")
    t0 = time.perf_counter()
    res = run_study(QUICK if args.quick else FULL, work)
    res.update(environment=environment("cpu"), total_seconds=round(time.perf_counter() - t0, 1),
               command=" ".join(["python -m bench.paraphrase_study", *(argv or sys.argv[1:])]))
    write_json(args.out, "paraphrase", res)
    (Path(args.out) / "paraphrase.md").write_text(markdown(res))
    log(markdown(res))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
