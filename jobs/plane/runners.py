"""Where a job's plane runs: a runner object the command settles once (`--runner`, jobs/kit/runtime.start_runner)
and hands to the plane, which asks it rather than a module-level switch.

The plane's work has four shapes, and each runner gives all four:
- `map(fn, calls, shared)`: plain tasks over a list of calls (the survey, the staging passes, trace's rounds);
- `pipeline(spec, items, stages)`: a part through the pool's stages (prepare, score per model, detect and write);
- `replanning(run, work, done, stats, echo)`: the part loop's pool, restarted on what is alive after a node loss;
- `isolator(spec)`: (the spec sized as the pool was, the row-isolating scorers) for the parts a failed pipeline
  left.

`RAY` runs them on a Ray cluster (the driver has joined it: jobs/kit/runtime.start_driver); `LOCAL` runs the same
stage classes in this process (jobs/plane/local_plane.py says what that gives up).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence


@dataclass(frozen=True)
class RayRunner:
    name: str = "ray"

    def map(self, fn: Callable, calls: Sequence[Mapping], shared: Mapping, *, desc: str, progress: bool = True,
            num_cpus: float = 1.0, max_retries: int = 2) -> Iterator:
        from jobs.plane.task_map import ray_task_map

        return ray_task_map(fn, calls, shared, desc=desc, progress=progress, num_cpus=num_cpus,
                            max_retries=max_retries)

    def pipeline(self, spec, items: Sequence[dict], stages, progress: bool = True) -> Iterator[dict]:
        from jobs.plane.scoring_pool import ray_pipeline

        return ray_pipeline(spec, items, stages, progress)

    def replanning(self, run: Callable[[list], Iterable[dict]], work: Sequence, done: Callable[[object], bool],
                   stats: dict, echo: Callable[[str], None]) -> Iterator[dict]:
        from jobs.plane.watch import replanning

        return replanning(run, work, done, stats, echo)

    def isolator(self, spec):
        from jobs.plane.isolation import Isolator
        from jobs.plane.pool_sizing import cluster_cpus, cluster_memory, pool_actors

        cpus = cluster_cpus()
        spec = pool_actors(spec, cpus, cluster_memory())  # the pipeline's actors and threads
        return spec, Isolator(spec, cpus, spec.stall_timeout_s)


@dataclass(frozen=True)
class LocalRunner:
    name: str = "local"

    def map(self, fn: Callable, calls: Sequence[Mapping], shared: Mapping, *, desc: str, progress: bool = True,
            num_cpus: float = 1.0, max_retries: int = 2) -> Iterator:
        from jobs.plane.local_plane import local_map

        return local_map(fn, list(calls), dict(shared), desc=desc, progress=progress)

    def pipeline(self, spec, items: Sequence[dict], stages, progress: bool = True) -> Iterator[dict]:
        from jobs.plane.local_plane import run_local_pipeline

        return run_local_pipeline(spec, items, stages, progress)

    def replanning(self, run: Callable[[list], Iterable[dict]], work: Sequence, done: Callable[[object], bool],
                   stats: dict, echo: Callable[[str], None]) -> Iterator[dict]:
        return iter(run(list(work)))  # one process: no nodes to lose

    def isolator(self, spec):
        from jobs.plane.isolation import LocalIsolator
        from jobs.plane.local_plane import local_pool

        spec, threads = local_pool(spec)
        return spec, LocalIsolator(spec, threads)


Runner = RayRunner | LocalRunner
RAY = RayRunner()
LOCAL = LocalRunner()


def runner_named(name: str) -> Runner:
    """The runner for a settled `--runner` value (`ray` or `local`)."""
    if name not in (RAY.name, LOCAL.name):
        raise ValueError(f"no runner named {name!r}: ray or local")
    return RAY if name == RAY.name else LOCAL
