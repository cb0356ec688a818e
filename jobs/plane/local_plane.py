"""The plane without Ray: a job's parts surveyed, scored, written and (on a failure) row-isolated in this process.

Why it exists: on a small input the fixed cost of Ray is most of the job. On 2 cores, 2,000 passages spent ~15 s
of ~34 s in Ray's start, the survey's worker imports and the scorer actors' start (a process each, importing torch
and transformers and loading the model: docs/scaling.md, "Issue 43"), against ~8 s of scoring. And a GPU machine
without Ray must still be able to score.

The same stage classes run here, in the same order, on the same parts (PrepareParts → ScoreParts per model →
PartFinisher), with the thread count per model copy that the Ray pool would use on this machine, and the same part
loop commits them (markers, resume, the ledger), so each part's files are the bytes the Ray pool writes; the
runner is not part of a job's fingerprint, and a job begun on one runner resumes on the other. What it gives up:
one process does the work (lanes in threads instead of actors; the blind baseline's helper process runs beside
it), a row that kills the process (not one that raises) ends the job with its committed parts kept (on Ray, the
isolation fallback quarantines such a row), and there are no nodes to lose or add.

`--runner auto` (the default) takes this runner for a small local input on a machine that is not part of a Ray
cluster (`choose_runner`), and Ray otherwise.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from typing import Iterator, Sequence

RUNNERS = ("auto", "ray", "local")
# auto runs inputs up to this size without Ray: ~8,000 passages of 1 KB. The lanes score about as fast as the Ray
# pool on one machine, so the bound is not for speed: past it a job runs long enough that Ray's ~15 s start is a
# small share, and worth paying for what only worker processes give (a row that crashes its process is isolated and
# quarantined instead of ending the job; a node can join).
LOCAL_MAX_BYTES = 8 * 2**20

def choose_runner(runner: str, input_bytes: int | None, *, hooks: dict, actors: int, gpus_per_actor: float,
                  environ=None, ray_running: bool | None = None) -> tuple[str, str]:
    """(runner, why). `auto` is local only when nothing asks for Ray: no RAY_ADDRESS, no Ray already running in
    this driver, no fault injection (its crashes are for worker processes), no pool of several actors asked for,
    at most one GPU, and a local input of at most LOCAL_MAX_BYTES (`input_bytes`; None: not local, e.g. S3)."""
    if runner not in RUNNERS:
        raise ValueError(f"--runner must be one of {', '.join(RUNNERS)}, got {runner!r}")
    if runner != "auto":
        return runner, f"--runner {runner}"
    environ = os.environ if environ is None else environ
    if ray_running is None:  # without importing Ray: a driver that never imported it runs none
        ray = sys.modules.get("ray")
        ray_running = ray is not None and hasattr(ray, "is_initialized") and ray.is_initialized()
    reasons = [why for cond, why in (
        (bool(environ.get("RAY_ADDRESS")), "RAY_ADDRESS names a cluster"),
        (ray_running, "Ray is already running here"),
        (bool(set(hooks) - {"score_log"}), "fault injection is set (its crashes and stalls are for worker processes)"),
        (actors > 1, f"--actors {actors} asks for a pool"),
        (gpus_per_actor > 1, "more than one GPU per actor"),
        (input_bytes is None, "the input is not a local file"),
        (input_bytes is not None and input_bytes > LOCAL_MAX_BYTES,
         f"the input is over {LOCAL_MAX_BYTES >> 20} MiB"),
    ) if cond]
    if reasons:
        return "ray", "auto: " + "; ".join(reasons)
    return "local", f"auto: a {input_bytes / 2**20:.1f} MiB local input, no cluster (--runner ray to use Ray)"


def local_input_bytes(benchmark: str) -> int | None:
    """The bytes of a local benchmark's files (None for s3:// or a path that is not there)."""
    from jobs.plane.benchmark_parts import benchmark_files

    if str(benchmark).startswith("s3://"):
        return None
    try:
        return sum(os.path.getsize(f) for f in benchmark_files(str(benchmark), False))
    except (OSError, ValueError):
        return None


def local_map(fn, calls: Sequence[dict], shared: dict, *, desc: str, progress: bool = True) -> Iterator:
    """fn(shared, **call) for every call, here, in order, with a progress bar (ray_task_map's local twin)."""
    from tqdm import tqdm

    for call in tqdm(calls, desc=desc, disable=not progress):
        yield fn(dict(shared), **call)


def local_pool(spec):
    """(spec with its actor count settled, torch threads per lane): the Ray pool's sizing on this machine
    (jobs/plane/pool_sizing.py), so that each lane computes with the thread count a Ray actor would. The thread
    count changes the last bits of float reductions; with the same count, a part's files are the same bytes."""
    from jobs.plane.pool_sizing import pool_actors, scorer_resources

    cpus = local_cpus()
    spec = pool_actors(spec, cpus, local_memory())
    return spec, scorer_resources(spec, cpus)[1]


def run_local_pipeline(spec, items: Sequence[dict], stages, progress: bool = True) -> Iterator[dict]:
    """Each item (one part) through the pool's stages in this process: prepare, then each model's scorer, the
    last one detecting and writing; yields each part's summary as its files land. As many lanes as the Ray pool
    would have actors, each a Python thread with its own stage instances (its own copy of the model, as an actor
    has) taking the next part: torch runs its kernels without the GIL, so the lanes keep the cores busy, with the
    per-op thread count of a Ray actor. torch's thread count is put back afterwards."""
    import queue

    import pyarrow as pa
    from tqdm import tqdm

    spec, threads = local_pool(spec)
    n_models = len(spec.branches)
    todo: queue.Queue = queue.Queue()
    for item in items:
        todo.put(item)
    done: queue.Queue = queue.Queue()
    stop = threading.Event()

    def lane() -> None:
        try:
            with _LOADING:  # one model load at a time: transformers' loading patches process-wide state
                prepare = stages.prepare(**stages.prepare_kwargs)
                scorers = [stages.score(spec=spec, branch=k, threads=threads,
                                        finish=stages.finish if k == n_models - 1 else None, **stages.score_kwargs)
                           for k in range(n_models)]
            while not stop.is_set():
                try:
                    item = todo.get_nowait()
                except queue.Empty:
                    return
                table = prepare(pa.Table.from_pylist([item]))
                for score in scorers:
                    table = score(table)
                done.put((table.column("summary").to_pylist(), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the driver's loop, raised there
            done.put((None, exc))
        finally:
            done.put((None, _LANE_DONE))

    restore = torch_threads_restorer()
    lanes = [threading.Thread(target=lane, name=f"tidemark-lane-{k}", daemon=True)
             for k in range(max(1, min(spec.actors, len(items))))]
    try:
        for t in lanes:
            t.start()
        running = len(lanes)
        with tqdm(total=len(items), desc="score", unit="part", disable=not progress) as bar:
            while running:
                summaries, exc = done.get()
                if exc is _LANE_DONE:
                    running -= 1
                    continue
                if exc is not None:
                    raise exc
                for s in summaries:
                    yield json.loads(s)
                bar.update(1)
    finally:
        stop.set()  # a failure (or the consumer stopping): lanes finish the part they hold and take no other
        for t in lanes:
            t.join()
        restore()


_LANE_DONE = object()
_LOADING = threading.Lock()


def torch_threads_restorer():
    """A function that puts torch's intra-op thread count back as it is now (the lanes set it for the job)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return lambda: None
    before = torch.get_num_threads()
    return lambda: torch.set_num_threads(before)


def local_cpus() -> float:
    return float(os.cpu_count() or 1)


def local_memory() -> float:
    """This machine's physical memory in bytes (0 when the OS does not say)."""
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0.0
