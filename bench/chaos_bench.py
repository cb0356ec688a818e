"""Chaos benchmark: the real `tidemark` CLI on a genuine two-node Ray cluster on this machine
(bench/cluster_harness.py), with nodes removed and drivers killed mid-job. Writes <out>/chaos.json.

Scenarios (each against an uninterrupted run of the same command on a fresh two-node cluster):
  evaluate-node-loss   evaluate, 2 scorer actors on 1+1 CPUs; the worker node removed after 2 parts
  audit-node-loss      audit (book folders), 2 scorer actors; the worker node removed after 2 parts
  build-node-loss      build-benchmark on a three-site Stack Exchange input; the worker node removed mid-job
  driver-sigkill       evaluate; the driver SIGKILLed after 2 parts, the whole cluster stopped (a head restart),
                       a new cluster started and the same command run again
  no-capacity          evaluate on a head with 0 CPUs and a 2-CPU worker; the worker removed: nothing can run,
                       the job must stop within --stall-timeout; a worker is added back and the command rerun
For each: what was killed, when, what the job did (finished / failed with which line, then resumed), the seconds
lost against the uninterrupted run, and whether outputs are identical (scores bit for bit, the release byte for
byte) and counts reconcile.

  python -m bench.chaos_bench --out bench/results [--only evaluate-node-loss,no-capacity]
"""
from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import sys
import time
from pathlib import Path

from bench.cluster_harness import ChaosRun, parts_done, run_cli, two_node_cluster

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("evaluate-node-loss", "audit-node-loss", "build-node-loss", "driver-sigkill", "no-capacity")
METHODS = "loss,min_k,zlib"


def log(msg: str) -> None:
    print(msg, flush=True)


def run_record(run: ChaosRun) -> dict:
    return {"rc": run.rc, "seconds": run.seconds, "fault": run.fault, "fault_at_s": run.fault_at_s,
            "observed_at_fault": run.observed_at_fault, "error": (run.error_lines() or [None])[-1],
            "hung": run.rc is None}


def evaluate_argv(study: dict, out: Path, stall: int = 300) -> list[str]:
    return ["evaluate", "--benchmark", study["benchmark"], "--model", study["model"], "--out", str(out),
            "--methods", METHODS, "--actors", "2", "--shard-size", "2", "--quiet", "--stall-timeout", str(stall),
            "--runner", "ray"]


def same_scores(a: Path, b: Path, files=("token_stats.parquet", "scores.parquet")) -> bool:
    import pyarrow.parquet as pq

    return all(pq.read_table(a / f).to_pylist() == pq.read_table(b / f).to_pylist() for f in files)


def counts_reconcile(out: Path, key: str = "counts") -> bool:
    run = json.loads((out / "run.json").read_text())
    c = run[key]
    return c["in"] == c["scored"] + c["quarantined"] and json.loads((out / "_SUCCESS").read_text())["counts"] == c


def faulted(argv, work: Path, name: str, *, head_cpus=1, worker_cpus=1, when, out: Path, kill_driver=False,
            recover=None, success: Path | None = None, timeout_s=600) -> dict:
    """Run `argv` on a fresh cluster with the fault, then (if it did not finish) the same command again; the
    record of both runs. `recover(nodes)` runs between the two (e.g. add a node back). `out` holds the part
    markers; `success` is the job's _SUCCESS (default OUT/_SUCCESS), which must not exist after a failed run."""
    success = success or out / "_SUCCESS"
    runs = []
    with two_node_cluster(head_cpus, worker_cpus) as nodes:
        first = run_cli(argv, nodes.address, work / f"{name}-1.log", fault=nodes.remove_worker,
                        fault_name=None if kill_driver else "worker node removed", when=when, kill_driver=kill_driver,
                        observe=lambda: {"parts": parts_done(out), "success": success.exists()},
                        timeout_s=timeout_s)
        runs.append(first)
        success_after_fault = success.exists() and first.rc != 0
        if first.rc != 0 and not kill_driver:
            if recover:
                recover(nodes)
            runs.append(run_cli(argv, nodes.address, work / f"{name}-2.log", timeout_s=timeout_s))
    if kill_driver:  # the head is gone with its cluster: a new one, the same command
        with two_node_cluster(head_cpus, worker_cpus) as nodes:
            runs.append(run_cli(argv, nodes.address, work / f"{name}-2.log", timeout_s=timeout_s))
    return {"runs": [run_record(r) for r in runs], "finished": runs[-1].rc == 0,
            "outcome": ("finished despite the fault" if runs[0].rc == 0 else
                        f"stopped ({'killed' if kill_driver else 'rc ' + str(runs[0].rc)}), then the same command "
                        f"{'finished' if runs[-1].rc == 0 else 'failed again'}"),
            "partial_success_marker": success_after_fault, "seconds": round(sum(r.seconds for r in runs), 2)}


def clean_run(argv, work: Path, name: str, *, head_cpus=1, worker_cpus=1) -> ChaosRun:
    with two_node_cluster(head_cpus, worker_cpus) as nodes:
        run = run_cli(argv, nodes.address, work / f"{name}-clean.log", timeout_s=600)
    if run.rc != 0:
        raise RuntimeError(f"the uninterrupted {name} run failed: {run.stderr_tail[-5:]}")
    return run


def finish(rec: dict, clean: ChaosRun, identical: bool, reconcile: bool) -> dict:
    rec.update(clean_seconds=clean.seconds, seconds_lost=round(rec["seconds"] - clean.seconds, 2),
               identical_to_uninterrupted=identical, counts_reconcile=reconcile)
    return rec


def scenario_evaluate(work: Path, study: dict, *, kill_driver=False, no_capacity=False) -> dict:
    name = "driver-sigkill" if kill_driver else "no-capacity" if no_capacity else "evaluate-node-loss"
    cpus = (0, 2) if no_capacity else (1, 1)
    clean_out = work / f"{name}-clean"
    clean = clean_run(evaluate_argv(study, clean_out), work, name, head_cpus=cpus[0], worker_cpus=cpus[1])
    out = work / f"{name}-out"
    rec = faulted(evaluate_argv(study, out, stall=30 if no_capacity else 300), work, name, head_cpus=cpus[0],
                  worker_cpus=cpus[1], when=lambda: parts_done(out) >= 2, out=out, kill_driver=kill_driver,
                  recover=(lambda nodes: nodes.add_worker(2)) if no_capacity else None)
    ok = rec["finished"]
    if ok:  # how the last run got there: parts reused from before the fault, rescheduled, isolated
        rec["parts"] = json.loads((out / "run.json").read_text())["parts"]
    return finish(rec, clean, ok and same_scores(clean_out, out), ok and counts_reconcile(out))


def scenario_audit(work: Path, books: dict) -> dict:
    def argv(out):
        f = books["folders"]
        return ["audit", "--target", f"{books['root']}/target", "--calib-members", f["calib/members"],
                "--calib-nonmembers", f["calib/nonmembers"], "--model", books["model"], "--out", str(out),
                "--snippets", "20", "--snippet-words", "64", "--n-bootstrap", "200", "--actors", "2",
                "--shard-size", "8", "--quiet", "--stall-timeout", "300"]

    clean_out, out = work / "audit-clean", work / "audit-out"
    clean = clean_run(argv(clean_out), work, "audit")
    rec = faulted(argv(out), work, "audit-node-loss", out=out / "scoring", success=out / "_SUCCESS",
                  when=lambda: parts_done(out / "scoring") >= 2)
    ok = rec["finished"]
    same = ok and _same_audit(clean_out, out)
    return finish(rec, clean, same, ok and _audit_counts(out))


def _same_audit(a: Path, b: Path) -> bool:
    import pyarrow.parquet as pq

    ra, rb = (json.loads((p / "report.json").read_text()) for p in (a, b))
    return (pq.read_table(a / "documents.parquet").to_pylist() == pq.read_table(b / "documents.parquet").to_pylist()
            and ra["corpus"] == rb["corpus"] and ra["counts"] == rb["counts"])


def _audit_counts(out: Path) -> bool:
    t = json.loads((out / "report.json").read_text())["counts"]["target"]
    return t["snippets_planned"] == t["snippets_scored"] + t["snippets_quarantined"]


def scenario_build(work: Path) -> dict:
    from bench.scale_bench import shifted_dump

    coffee = Path(os.environ.get("TIDEMARK_COFFEE_POSTS", ROOT.parent / "shared" / "data" / "stackexchange"
                                 / "coffee.stackexchange.com" / "Posts.xml"))
    if not coffee.is_file():
        return {"skipped": f"{coffee}: the real coffee dump is not here (set TIDEMARK_COFFEE_POSTS)"}
    sites = work / "se-sites"
    for k, site in enumerate(("coffee", "tea", "beer")):  # three site files of 1-3 id-shifted copies of coffee
        dump = sites / f"{site}.stackexchange.com" / "Posts.xml"
        if not dump.exists():
            shifted_dump(coffee, dump, (k + 1) * 4000)

    def argv(out):
        return ["build-benchmark", "--config", str(ROOT / "jobs" / "configs" / "stackmia.yaml"),
                "--set", f"source.path={sites}", "--set", "cutoffs.member_before=2015-02-01",
                "--set", "cutoffs.nonmember_after=2015-03-01", "--out", str(out)]

    clean_out, out = work / "build-clean", work / "build-out"
    clean = clean_run(argv(clean_out), work, "build")
    started = time.monotonic()
    rec = faulted(argv(out), work, "build-node-loss", out=out,
                  when=lambda: time.monotonic() - started > clean.seconds * 0.4)
    ok = rec["finished"]
    same = ok and _same_tree(clean_out, out)
    return finish(rec, clean, same, ok and _steps_reconcile(json.loads((out / "manifest.json").read_text())))


def _steps_reconcile(manifest: dict) -> bool:
    """Each curation step: in = kept + dropped, and a step takes in what the one before kept."""
    steps = manifest["counts"]["steps"]
    chained = all(b["in"] == a["kept"] for a, b in zip(steps, steps[1:]) if a["unit"] == b["unit"])
    return chained and all(st["in"] == st["kept"] + sum(st["dropped"].values()) for st in steps)


def _same_tree(a: Path, b: Path, skip=("_SUCCESS",)) -> bool:
    """Every release file byte-identical, the manifest included; _SUCCESS names its run, so only the manifest
    digest and row count it records are compared."""
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and p.name not in skip)
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file() and p.name not in skip)
    if fa != fb:
        return False
    sa, sb = (json.loads((p / "_SUCCESS").read_text()) for p in (a, b))
    return (all(filecmp.cmp(a / f, b / f, shallow=False) for f in fa)
            and (sa["manifest_sha256"], sa["rows"]) == (sb["manifest_sha256"], sb["rows"]))


def run_chaos(wanted, work: Path) -> dict:
    """Run the named scenarios in `work`; {"what", "scenarios": {name: record}} (bench/run.py's `chaos`)."""
    from jobs.kit.studies import build_known_membership

    work.mkdir(parents=True, exist_ok=True)
    study = build_known_membership(work / "study", n_per_label=30, buckets=(32,), train_seconds=1.5, seed=3)
    results = {}
    for name in wanted:
        log(f"chaos: {name} ...")
        t0 = time.monotonic()
        if name == "audit-node-loss":
            from jobs.kit.studies import build_book_study

            books = build_book_study(work / "books", books_per_folder=4, book_words=1500, gsm_per_label=10,
                                     steps=160, seed=0)
            results[name] = scenario_audit(work, books)
        elif name == "build-node-loss":
            results[name] = scenario_build(work)
        else:
            results[name] = scenario_evaluate(work, study, kill_driver=name == "driver-sigkill",
                                              no_capacity=name == "no-capacity")
        results[name]["bench_s"] = round(time.monotonic() - t0, 1)
        log(f"  {json.dumps({k: v for k, v in results[name].items() if k != 'runs'})}")
    return {"what": __doc__.split("\n\n")[1], "scenarios": results}


def all_held(record: dict) -> bool:
    """Every scenario that ran finished with outputs identical to the uninterrupted run's and counts reconciled."""
    return all("skipped" in r or (r["identical_to_uninterrupted"] and r["counts_reconcile"]
                                  and not r["partial_success_marker"]) for r in record["scenarios"].values())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--work", default=None, help="scratch directory (default: OUT/_chaos_work)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    args = ap.parse_args(argv)
    wanted = [s for s in (args.only.split(",") if args.only else SCENARIOS) if s]
    record = run_chaos(wanted, Path(args.work or Path(args.out) / "_chaos_work"))
    record["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
                         "loadavg": os.getloadavg()}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = Path(args.out) / ("chaos.json" if not args.only else f"chaos-{'-'.join(wanted)}.json")
    path.write_text(json.dumps(record, indent=2) + "\n")
    log(f"wrote {path}")
    return 0 if all_held(record) else 1


if __name__ == "__main__":
    sys.exit(main())
