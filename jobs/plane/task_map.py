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
