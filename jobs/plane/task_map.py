"""Plain Ray tasks over a list of calls, with a progress bar: the driver submits, workers run, results come back as
they finish. Used where a job's unit of work is a task rather than a Ray Data stage (the audit's staging, doc-mia's
grid passes)."""
from __future__ import annotations

from typing import Callable, Iterator, Mapping, Sequence


def ray_task_map(fn: Callable, calls: Sequence[Mapping], shared: Mapping, *, desc: str, progress: bool = True,
                 num_cpus: float = 1.0, max_retries: int = 2) -> Iterator:
    """fn(shared, **call) for every call as a Ray task; `shared` goes through the object store once, not once per
    task. Yields each result as its task finishes (in any order). Needs a running Ray."""
    import ray

    remote = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(fn)
    shared_ref = ray.put(dict(shared))
    yield from gather([remote.remote(shared_ref, **call) for call in calls], desc=desc, progress=progress)


def gather(pending: Sequence, *, desc: str, progress: bool = True) -> Iterator:
    """The results of submitted tasks (object references) as they finish, in any order, with a progress bar."""
    import ray
    from tqdm import tqdm

    pending = list(pending)
    with tqdm(total=len(pending), desc=desc, disable=not progress) as bar:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            yield from ray.get(ready)
            bar.update(len(ready))


def watched_tasks(fn: Callable, calls: Sequence[tuple], *, desc: str, num_cpus: float, progress: bool = True,
                  max_retries: int = 2) -> Iterator:
    """fn(*call) for every call as a Ray task, results as they finish, under the part loop's stall bound: no task
    finishing within STALL_TIMEOUT_S raises StalledPool, saying what a task needs and what the cluster offers."""
    import ray

    from jobs.plane.retry_policy import STALL_TIMEOUT_S
    from jobs.plane.watch import capacity_line, watch

    task = ray.remote(num_cpus=num_cpus, max_retries=max_retries)(fn)
    refs = [task.remote(*call) for call in calls]
    yield from watch(gather(refs, desc=desc, progress=progress), STALL_TIMEOUT_S,
                     lambda: capacity_line({"CPU": num_cpus}))
