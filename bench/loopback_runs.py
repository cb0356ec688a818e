"""The real `tidemark evaluate --api-logprobs none` against the loopback server, shared by the text-only benches
(bench/generation_bench.py, bench/generation_throughput.py, bench/cutoff_bench.py), which import it from here rather
than from each other."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

DETECTORS = "ngram_coverage,creativity_index,samia"
ROOT = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[generation-bench] {msg}", file=sys.stderr, flush=True)


def serve(model: str, *extra: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "scoring.api.loopback", "--model", model, "--name", "bench",
                             "--lifetime-s", "3600", *extra], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"the loopback server did not start (printed {url!r})")
    return proc, url


def evaluate(url: str, bench: Path, out: Path, samples: int, *extra: str) -> dict:
    """The real CLI in a subprocess; returns its run.json, metrics and wall time."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "jobs.cli", "evaluate", "--benchmark", str(bench), "--model", "bench", "--api-base",
           url, "--api-logprobs", "none", "--methods", DETECTORS, "--samples", str(samples), "--out", str(out),
           "--set-test", "ngram_coverage", "--quiet", *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"evaluate failed: {done.stderr[-2000:]}")
    run = json.loads((out / "run.json").read_text())
    metrics = {m["column"]: {"auc": m["auc"], "auc_ci": m["auc_ci"], "tpr_at_5_fpr": m["tpr_at_5_fpr"]}
               for m in json.loads((out / "metrics.json").read_text()) if m["bucket"] == "all"}
    return {"seconds": round(time.perf_counter() - t0, 1), "metrics": metrics, "set_test": run["set_test"],
            "spent": run["generation"]["spent"], "plan": run["generation"]["plan"], "counts": run["counts"]}
