"""`python -m bench.scale_bench --job dataset-inference`: does `tidemark dataset-inference` keep a flat driver as
the suspect and validation sets grow?

For N in --sizes, N/2 suspect and N/2 validation passages (SOTU, 32 words, jsonl rows: one passage each, so the
staging cuts nothing), `tidemark dataset-inference --methods <five detectors>` runs as a subprocess with its own
local Ray while its RSS and the Ray workers' are sampled (bench/scale_bench.run_job). The driver reads only the
score columns (about a dozen floats a passage) for the learn/test split; everything else stays on the workers.

Results: bench/results/scale_dataset_inference.json and .png. `--job codec` runs `dataset-inference --method codec`
on N suspect passages alone (no validation set; --shots 3 from a pool of 1,000): scale_codec.json and .png.
"""
from __future__ import annotations

import json
from pathlib import Path

METHODS = "loss,min_k,min_k_pp,max_k,zlib"


def main_bench(args) -> int:
    from bench.scale_jobs import WORDS, log, make_rows, run_job, write_job_runs
    from bench.workspace import tiny_model_dir

    work = Path(args.work or Path(args.out) / "_scale_di_work")
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows = make_rows(max(sizes))
    model = tiny_model_dir(work, [r["text"] for r in rows[:5000]])["path"]
    runs: dict = {}
    for n in sizes:
        half = n // 2
        sets = {}
        for name, part in (("suspect", rows[:half]), ("validation", rows[half:2 * half])):
            sets[name] = work / f"{name}-{n}.jsonl"
            sets[name].write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in part))
        out = work / f"out-{n}"
        log(f"dataset-inference on {half} + {half} passages ...")
        res = run_job(["dataset-inference", "--suspect", str(sets["suspect"]), "--validation",
                       str(sets["validation"]), "--model", model, "--out", str(out), "--methods", METHODS,
                       "--min-words", "4", "--recall-shots", "0"], out, "report.json")
        report = json.loads((out / "report.json").read_text())
        res["p_value"], res["sizes"] = report["p_value"], report["sizes"]
        res["rows_per_s"] = round(n / res["wall_s"], 1)
        runs[n] = res
        log(f"  {res['wall_s']} s, driver peak {res['driver_peak_mb']} MB, workers {res['workers_peak_mb']} MB, "
            f"p = {res['p_value']:.3g}")
    return write_job_runs(args, work, "dataset-inference", runs, "passage", "passages (suspect + validation)",
                          f"tidemark dataset-inference (--methods {METHODS}) as a subprocess, tiny GPT-2 with random "
                          f"weights, SOTU passages of {WORDS} words split into two halves of one pool (so p should "
                          "not be small)")


def main_codec(args) -> int:
    """CoDeC's flat-driver check: N suspect passages, two views each (alone, and after 3 pool passages); the driver
    holds the pool (<= 1,000 passages) and streams the score parts once into rows.parquet."""
    from bench.scale_jobs import WORDS, log, make_rows, run_job, write_job_runs
    from bench.workspace import tiny_model_dir

    work = Path(args.work or Path(args.out) / "_scale_codec_work")
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows = make_rows(max(sizes))
    model = tiny_model_dir(work, [r["text"] for r in rows[:5000]])["path"]
    runs: dict = {}
    for n in sizes:
        suspect = work / f"suspect-{n}.jsonl"
        suspect.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows[:n]))
        out = work / f"out-{n}"
        log(f"dataset-inference --method codec on {n} passages ...")
        res = run_job(["dataset-inference", "--method", "codec", "--suspect", str(suspect), "--model", model,
                       "--out", str(out), "--shots", "3", "--pool", "1000", "--min-words", "4"], out, "report.json")
        report = json.loads((out / "report.json").read_text())
        res["contamination_score"], res["mean_delta"] = report["contamination_score"], report["mean_delta"]
        res["rows_per_s"] = round(n / res["wall_s"], 1)
        runs[n] = res
        log(f"  {res['wall_s']} s, driver peak {res['driver_peak_mb']} MB, workers {res['workers_peak_mb']} MB")
    return write_job_runs(args, work, "codec", runs, "passage", "suspect passages",
                          f"tidemark dataset-inference --method codec (--shots 3, --pool 1000) as a subprocess, tiny "
                          f"GPT-2 with random weights, SOTU passages of {WORDS} words")
