"""Shared helpers of the benchmarks: environment record, timing, inputs, result files. No Ray here: the GPU
benchmark (bench/gpu.py) imports this on a machine without it."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    import torch

    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return f"{cpu_model()} ({len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()} cores)"


def git_state() -> dict:
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=10).stdout.strip())
        return {"commit": commit or None, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment(device: str = "cpu") -> dict:
    """What a result file records about where it was measured."""
    import torch

    try:
        import transformers

        tf_version = transformers.__version__
    except ImportError:  # pragma: no cover
        tf_version = None
    return {
        "device": str(device),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "transformers": tf_version,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load_average": load_average(),  # 1/5/15-minute load: above the core count means the timings shared CPUs
        "git": git_state(),
    }


def sync(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def timed(fn: Callable[[], Any], device: str = "cpu") -> tuple[float, Any]:
    """Wall seconds of fn() (CUDA work finished before the clock stops) and its result."""
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - start, out


def random_sequences(lengths: Sequence[int], vocab: int, seed: int = 0) -> list[np.ndarray]:
    """Token ids for throughput runs: speed does not depend on which tokens they are."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=int(n), dtype=np.int64) for n in lengths]


def mixed_lengths(total_tokens: int, *, median: int = 150, sigma: float = 1.0, lo: int = 16, hi: int = 2048,
                  seed: int = 0) -> list[int]:
    """A realistic mix: log-normal lengths (median `median` tokens, long tail) clipped to [lo, hi], drawn until
    `total_tokens` is reached. Benchmark passages (WikiMIA 32–256 words, Stack Exchange posts, paragraphs) are
    mostly short with a few long documents, which is what makes unsorted padding expensive."""
    rng = np.random.default_rng(seed)
    out, total = [], 0
    while total < total_tokens:
        n = int(np.clip(round(rng.lognormal(np.log(median), sigma)), lo, hi))
        out.append(n)
        total += n
    return out


def write_json(out_dir: str | Path, name: str, payload: dict) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=_jsonable) + "\n")
    return path


def write_results(out_dir: str | Path, name: str, result: dict, render, log=print) -> None:
    """A study's NAME.json and NAME.md (render(result)) in out_dir, and a line saying so."""
    write_json(out_dir, name, result)
    (Path(out_dir) / f"{name}.md").write_text(render(result))
    log(f"wrote {out_dir}/{name}.json and .md in {result.get('wall_seconds')} s")


def _jsonable(x):
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def dtype_of(name: str):
    import torch

    return {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
            "float16": torch.float16, "fp16": torch.float16}[name]


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")
