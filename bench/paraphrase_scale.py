"""`python -m bench.scale_bench --job paraphrase`: does `tidemark paraphrase` keep a flat driver as the benchmark
grows? N rows of SOTU passages (32 words, jsonl; copies with new ids once the corpus runs out) are paraphrased
with WordNet at rate 0.2 by the CLI as a subprocess with its own local Ray, its RSS and the Ray workers' sampled
(bench/scale_bench.run_job). Workers read, rewrite and write the parts; the driver adds up per-part counts.

Results: bench/results/scale_paraphrase.json and .png.
"""
from __future__ import annotations

import json
from pathlib import Path


def main_bench(args) -> int:
    from bench.scale_jobs import WORDS, log, make_rows, run_job, write_job_runs

    work = Path(args.work or Path(args.out) / "_scale_paraphrase_work")
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows = make_rows(max(sizes))
    runs: dict = {}
    for n in sizes:
        bench = work / f"bench-{n}.jsonl"
        bench.write_text("".join(json.dumps({"id": r["id"], "input": r["text"], "label": k % 2, "bucket": WORDS})
                                 + "\n" for k, r in enumerate(rows[:n])))
        out = work / f"out-{n}"
        log(f"paraphrase (wordnet, rate 0.2) on {n} rows ...")
        res = run_job(["paraphrase", "--benchmark", str(bench), "--out", str(out), "--rate", "0.2"], out,
                      "manifest.json")
        manifest = json.loads((out / "manifest.json").read_text())
        res["changed_over_content_words"] = manifest["measured"]["changed_over_content_words"]
        res["rows_per_s"] = round(n / res["wall_s"], 1)
        runs[n] = res
        log(f"  {res['wall_s']} s, driver peak {res['driver_peak_mb']} MB, workers {res['workers_peak_mb']} MB")
    return write_job_runs(args, work, "paraphrase", runs, "row", "benchmark rows",
                          f"tidemark paraphrase (wordnet, rate 0.2) as a subprocess, SOTU passages of {WORDS} words")
