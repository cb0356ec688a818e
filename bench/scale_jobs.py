"""What every scale bench shares (bench/scale_bench.py and the per-job benches it dispatches to, which import from
here rather than from it, so that no two bench modules import each other): the real CLI as a subprocess with its
driver's and Ray workers' RSS sampled, the SOTU rows, and the one-job summary and plot."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = 32


def log(msg: str) -> None:
    print(f"[bench-scale] {msg}", file=sys.stderr, flush=True)


def make_rows(n: int) -> list[dict]:
    from scoring.studies.known_membership import sotu_passages

    base = sotu_passages(WORDS, None, seed=0)
    rows = []
    for k in range(n):
        p = base[k % len(base)]
        rows.append({"id": f"{p['id']}#{k // len(base)}", "text": p["text"]})
    return rows


class RssSampler:
    """Peak RSS of one process and of the Ray workers it started, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.5):
        self.pid, self.every = pid, every
        self.driver_peak = self.workers_peak = 0
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        t0 = time.monotonic()
        while not self._stop.is_set():
            try:
                proc = psutil.Process(self.pid)
                driver = proc.memory_info().rss
                family = proc.children(recursive=True)
            except psutil.Error:
                break
            workers = 0
            # this job's own workers only (its local Ray's raylet starts them under the driver): on a shared machine
            # another job's `ray::*` processes would otherwise count
            for p in family:
                try:
                    cmd = p.cmdline()
                    if cmd and cmd[0].startswith("ray::"):
                        workers += p.memory_info().rss
                except psutil.Error:
                    continue
            self.driver_peak = max(self.driver_peak, driver)
            self.workers_peak = max(self.workers_peak, workers)
            self.samples.append((round(time.monotonic() - t0, 1), driver, workers))
            self._stop.wait(self.every)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def run_job(args: list[str], out: Path, result_file: str, quiet: bool = True) -> dict:
    """`tidemark ARGS --quiet` as a subprocess with its own local Ray, its RSS sampled; counts, phases and part
    stats from its result file."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(Path(sys.executable).parent / "tidemark"), *args, *(["--quiet"] if quiet else [])]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_AUTH_MODE", "disabled")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    with RssSampler(proc.pid) as rss:
        _, err = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {err[-3000:]}")
    run = json.loads((out / result_file).read_text())
    step = max(1, len(rss.samples) // 200)  # keep ~200 samples of the RSS timeline
    return {"wall_s": round(wall, 2), "driver_peak_mb": round(rss.driver_peak / 2**20, 1),
            "workers_peak_mb": round(rss.workers_peak / 2**20, 1), "counts": run["counts"],
            "phases_s": run.get("phases_s"), "parts": run.get("parts"),
            "rss_timeline_mb": [[t, round(d / 2**20, 1), round(w / 2**20, 1)] for t, d, w in rss.samples[::step]]}


def write_job_runs(args, work: Path, job: str, runs: dict, unit: str, axis: str, what: str) -> int:
    """A one-job scale run's summary (driver peak ratio, marginal seconds per `unit`), scale_<job>.json and .png."""
    from bench.common import environment, write_json

    ns = sorted(runs)
    summary = {"driver_peak_ratio_largest_vs_smallest": round(runs[ns[-1]]["driver_peak_mb"]
                                                              / runs[ns[0]]["driver_peak_mb"], 3),
               f"marginal_s_per_{unit}": {f"{a}->{b}": (runs[b]["wall_s"] - runs[a]["wall_s"]) / (b - a)
                                          for a, b in zip(ns, ns[1:])}}
    name = f"scale_{job.replace('-', '_')}"
    write_json(args.out, name, {"what": what, "environment": environment("cpu"), "runs": {job: runs},
                                "summary": summary})
    plot({job: runs}, Path(args.out) / f"{name}.png", what=axis)
    log(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def plot(runs: dict, path: Path, what: str = "benchmark rows") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for label, r in runs.items():
        ns = sorted(r)
        name = label if label in ("audit", "doc-mia", "build", "build_7z", "wikidump", "arxiv",
                                  "dataset-inference", "paraphrase") else f"--methods {label}"
        a.plot(ns, [r[n]["driver_peak_mb"] for n in ns], "o-", label=f"driver, {name}")
        a.plot(ns, [r[n]["workers_peak_mb"] for n in ns], "s--", label=f"Ray workers, {name}")
        b.plot(ns, [r[n]["rows_per_s"] for n in ns], "o-", label=name)
    a.set(xscale="log", xlabel=what, ylabel="peak RSS (MB)", title="memory")
    b.set(xscale="log", xlabel=what, ylabel="rows/s (wall, start-up included)", title="throughput")
    a.legend(fontsize=7)
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
