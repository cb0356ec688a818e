"""`tidemark cutoff` at scale, beside `tidemark evaluate` on the same rows (`python -m bench.cutoff_scale`; `make
bench-scale` runs it at 10k and 100k dated rows).

N real short passages (State of the Union, 32 words; copies with new ids once the corpus runs out, as
bench/scale_bench.py makes them) are dated round-robin over 24 months and split between two sources; `tidemark
cutoff --runner ray` (loss and min_k_pp, 9,999 permutations and 1,000 bootstrap resamples per source and detector)
and `tidemark evaluate --runner ray` on the same passages (with alternating labels, the same two detectors) run as
subprocesses with their own local Ray, their driver's and Ray workers' RSS sampled every 0.5 s. The model is the
scale bench's tiny GPT-2. What differs between the two is the cutoff job's staging pass, its join of dates and
scores, and its estimates, against evaluate's metrics, blind baseline and report.

Results: bench/results/scale_cutoff.json and scale_cutoff.png.
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from bench.scale_jobs import log, make_rows, run_job

MONTHS = 24
FIRST = (2019, 1)


def dated(rows: list[dict]) -> list[dict]:
    from scoring.cutoff.periods import month_index, month_label

    first = month_index(*FIRST)
    return [{"id": r["id"], "text": r["text"], "date": month_label(first + k % MONTHS),
             "source": "a" if (k // MONTHS) % 2 else "b"} for k, r in enumerate(rows)]


def main(argv=None) -> int:
    from bench.common import environment, write_json
    from bench.workspace import tiny_model_dir

    ap = argparse.ArgumentParser(prog="python -m bench.cutoff_scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--work", default=None)
    args = ap.parse_args(argv)
    work = Path(args.work or Path(args.out) / "_scale_cutoff_work")
    work.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    rows = make_rows(max(sizes))
    model = tiny_model_dir(work, [r["text"] for r in rows[:5000]])["path"]
    runs: dict = {"cutoff": {}, "evaluate": {}}
    for n in sizes:
        texts = work / f"dated-{n}.jsonl"
        texts.write_text("".join(json.dumps(r) + "\n" for r in dated(rows[:n])))
        bench = work / f"bench-{n}.jsonl"
        bench.write_text("".join(json.dumps({"id": r["id"], "input": r["text"], "label": k % 2}) + "\n"
                                 for k, r in enumerate(rows[:n])))
        for job, args_ in (("cutoff", ["cutoff", "--texts", str(texts)]),
                           ("evaluate", ["evaluate", "--benchmark", str(bench)])):
            out = work / f"out-{job}-{n}"
            log(f"{job} on {n} rows ...")
            res = run_job([*args_, "--model", model, "--out", str(out), "--methods", "loss,min_k_pp",
                           "--runner", "ray"], out, "run.json")
            res["rows_per_s"] = round(n / res["wall_s"], 1)
            runs[job][n] = res
            log(f"  {res['wall_s']} s, driver peak {res['driver_peak_mb']} MB, workers {res['workers_peak_mb']} MB")
    ns = sorted(sizes)
    summary = {}
    for job, r in runs.items():
        summary[job] = {"driver_peak_ratio_largest_vs_smallest": round(r[ns[-1]]["driver_peak_mb"]
                                                                       / r[ns[0]]["driver_peak_mb"], 3),
                        "marginal_s_per_row": {f"{a}->{b}": (r[b]["wall_s"] - r[a]["wall_s"]) / (b - a)
                                               for a, b in zip(ns, ns[1:])}}
    summary["cutoff_wall_x_evaluate"] = {n: round(runs["cutoff"][n]["wall_s"] / runs["evaluate"][n]["wall_s"], 2)
                                         for n in ns}
    write_json(args.out, "scale_cutoff", {
        "what": f"tidemark cutoff and tidemark evaluate (--runner ray, loss,min_k_pp) as subprocesses on the same N "
                f"SOTU passages of 32 words ({MONTHS} months, two sources), tiny GPT-2",
        "environment": environment("cpu"), "runs": runs, "summary": summary})
    plot(runs, Path(args.out) / "scale_cutoff.png")
    log(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def plot(runs: dict, path: Path) -> None:
    from scoring.reports.figures import png_bytes, pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for job, r in runs.items():
        ns = sorted(r)
        a.plot(ns, [r[n]["driver_peak_mb"] for n in ns], "o-", label=f"driver, {job}")
        a.plot(ns, [r[n]["workers_peak_mb"] for n in ns], "s--", label=f"Ray workers, {job}")
        b.plot(ns, [r[n]["rows_per_s"] for n in ns], "o-", label=job)
    a.set(xscale="log", xlabel="dated rows", ylabel="peak RSS (MB)", title="memory")
    b.set(xscale="log", xlabel="dated rows", ylabel="rows/s (wall, start-up included)", title="throughput")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    path.write_bytes(png_bytes(fig))


if __name__ == "__main__":
    raise SystemExit(main())
