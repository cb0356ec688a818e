"""The fallback after a failed pipeline: parts that were not committed are scored row-isolated.

Ray Data restarts a crashed scorer actor and retries its part (`max_restarts`, `max_task_retries`); a row that
crashes its worker every time exhausts that and fails the pipeline. Then, part by part (so the driver holds one
part at most), scorer actors built from the same spec take the part's rows in batches; a batch that fails is
retried row by row, and a row that fails ROW_ATTEMPTS times on its own is marked `worker_failed` with its error
(the finisher quarantines it). Rows failing alone one after another with nothing scored between is the model or
the cluster, not a row: the job fails instead of quarantining everything.
"""
from __future__ import annotations

import time

import pyarrow as pa

from jobs.kit.log import log
from jobs.plane.scoring_pool import WORKER_FAILED, ScoringSpec

from jobs.plane.retry_policy import (ISOLATION_BATCH, ISOLATION_MAX_RESTARTS, ISOLATION_MAX_TASK_RETRIES,
                               MAX_SINGLE_FAILURES_IN_A_ROW, ROW_ATTEMPTS, STALL_TIMEOUT_S)


class RowScorer:
    """Tokenise and score text rows (id, input) for every model of the spec in one process."""

    def __init__(self, spec: ScoringSpec, threads: int | None = None):
        from jobs.plane.tasks import ScoreTask, TokenizeTask

        self.branches = [(TokenizeTask(**spec.tokenize_kwargs(b)), ScoreTask(**spec.score_kwargs(b, threads)))
                         for b in spec.branches]

    def ping(self) -> bool:
        return True

    def __call__(self, table: pa.Table) -> pa.Table:
        return pa.concat_tables([score(tokenize(table)) for tokenize, score in self.branches])


class RowIsolation:
    """The isolation rule, whatever runs the rows: a part's rows in batches; a batch that fails is retried row by
    row; a row that fails ROW_ATTEMPTS times on its own is marked `worker_failed`; rows failing alone one after
    another with nothing scored between fail the job. Subclasses say how a batch runs (`_submit`, `_result`)."""

    model: str
    single_failures_in_a_row: int = 0
    batch_failures: int = 0

    def _submit(self, k: int, table: pa.Table):
        raise NotImplementedError

    def _result(self, handle) -> pa.Table:
        raise NotImplementedError

    def _before_row(self, k: int) -> None:
        """Called before each single-row attempt (Ray: wait until the actor is up again)."""

    def close(self) -> None:
        pass

    def score_rows(self, rows: pa.Table) -> pa.Table:
        from jobs.plane.tasks import SCORED_SCHEMA
        from jobs.plane.watch import StalledPool

        texts = rows.select(["id", "input"])
        batches = [texts.slice(i, ISOLATION_BATCH) for i in range(0, texts.num_rows, ISOLATION_BATCH)]
        handles = [(b, self._submit(k, b)) for k, b in enumerate(batches)]
        tables, retry = [], []
        for b, handle in handles:
            try:
                tables.append(self._result(handle))
                self.single_failures_in_a_row = 0
            except StalledPool:
                raise
            except Exception:  # noqa: BLE001 - a crash somewhere in the batch: find the row
                self.batch_failures += 1
                retry.extend(b.slice(i, 1) for i in range(b.num_rows))
        for k, one in enumerate(retry):
            tables.append(self._one(k, one))
        tables = [t.select(SCORED_SCHEMA.names).cast(SCORED_SCHEMA) for t in tables]
        return pa.concat_tables(tables) if tables else SCORED_SCHEMA.empty_table()

    def _one(self, k: int, one: pa.Table) -> pa.Table:
        from jobs.plane.watch import StalledPool
        from scoring.api.client import ApiFatal, api_fatal_reason

        error = None
        for _ in range(ROW_ATTEMPTS):
            self._before_row(k)  # a failure after this is the row's, not a restart still under way
            try:
                out = self._result(self._submit(k, one))
                self.single_failures_in_a_row = 0
                return out
            except StalledPool:
                raise
            except Exception as exc:  # noqa: BLE001
                if api_fatal_reason(exc):  # the served model, not this row
                    raise ApiFatal(api_fatal_reason(exc)) from None
                error = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        self.single_failures_in_a_row += 1
        if self.single_failures_in_a_row > MAX_SINGLE_FAILURES_IN_A_ROW:
            raise RuntimeError(f"{self.single_failures_in_a_row} different rows failed one by one with nothing "
                               f"scored in between; last: {error}")
        rid = one.column("id")[0].as_py()
        log(f"quarantining row {rid!r}: it failed {ROW_ATTEMPTS} times on its own ({error[:200]})")
        return crash_rows([rid], self.model, error)


class Isolator(RowIsolation):
    """Up to `spec.actors` RowScorer actors, keeping those the alive cluster can start (a lost node's share of the
    pool would wait for resources forever); every wait is bounded by the stall timeout."""

    def __init__(self, spec: ScoringSpec, cpus: float, stall_timeout_s: float = STALL_TIMEOUT_S):
        import ray

        from jobs.plane.pool_sizing import scorer_resources

        num_cpus, threads = scorer_resources(spec, cpus)
        actor_cls = ray.remote(RowScorer).options(num_cpus=num_cpus, num_gpus=spec.gpus_per_actor or None,
                                                  max_restarts=ISOLATION_MAX_RESTARTS,
                                                  max_task_retries=ISOLATION_MAX_TASK_RETRIES)
        self.timeout = stall_timeout_s
        self.actors = _startable([actor_cls.remote(spec, threads) for _ in range(max(1, spec.actors))],
                                 stall_timeout_s, {"CPU": num_cpus, "GPU": spec.gpus_per_actor})
        self.model = spec.branches[0].model

    def close(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)

    def _submit(self, k: int, table: pa.Table):
        return self.actors[k % len(self.actors)].__call__.remote(table)

    def _result(self, handle) -> pa.Table:
        import ray
        from ray.exceptions import GetTimeoutError

        try:
            return ray.get(handle, timeout=self.timeout)
        except GetTimeoutError:
            raise _stalled(self.timeout) from None

    def _before_row(self, k: int) -> None:
        _wait_ready(self.actors[k % len(self.actors)], self.timeout)


class LocalIsolator(RowIsolation):
    """The same rule in this process (jobs/plane/local_plane.py): one RowScorer, called directly. A row that raises
    is found and quarantined as on Ray; one that kills the process ends the job (committed parts are kept)."""

    def __init__(self, spec: ScoringSpec, threads: int | None):
        from jobs.plane.local_plane import torch_threads_restorer

        self._restore_threads = torch_threads_restorer()  # the scorer sets torch's threads for this job only
        self.scorer = RowScorer(spec, threads)
        self.model = spec.branches[0].model

    def close(self) -> None:
        self._restore_threads()

    def _submit(self, k: int, table: pa.Table):
        return table  # run when its result is asked for, so that a failure is caught where Ray's would be

    def _result(self, handle) -> pa.Table:
        return self.scorer(handle)


def crash_rows(ids, model: str, error: str) -> pa.Table:
    """Token-stats rows for texts whose worker crashed: only the original view, with the error."""
    from jobs.plane.tasks import SCORED_SCHEMA
    from scoring.lm.tokenstats import empty_record

    recs = [dict(empty_record(i, "original", model, f"{WORKER_FAILED}: {error}"), prefix_len=None) for i in ids]
    return pa.Table.from_pylist(recs, schema=SCORED_SCHEMA)


def _stalled(timeout_s: float):
    from jobs.plane.watch import StalledPool

    return StalledPool(f"the row-isolating scorers answered nothing in {timeout_s:g} s")


def _startable(actors: list, timeout_s: float, needs: dict, grace_s: float = 30.0) -> list:
    """The actors that start: waits up to `timeout_s` for the first, then `grace_s` for the rest, and kills those
    still pending (the cluster has no room for them now)."""
    import ray

    from jobs.plane.watch import StalledPool, capacity_line

    pings = {a.ping.remote(): a for a in actors}
    ready, pending = ray.wait(list(pings), num_returns=1, timeout=timeout_s)
    if not ready:
        raise StalledPool(f"no row-isolating scorer started in {timeout_s:g} s: {capacity_line(needs)}")
    if pending:
        more, pending = ray.wait(pending, num_returns=len(pending), timeout=grace_s)
        ready += more
    for ref in pending:
        ray.kill(pings[ref])
    if pending:
        log(f"going on with {len(ready)} of {len(actors)} row-isolating scorer(s): the cluster has no room for "
             "the others now")
    return [pings[ref] for ref in ready]


def _wait_ready(actor, timeout_s: float = 300.0) -> None:
    import ray
    from ray.exceptions import ActorUnavailableError, GetTimeoutError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            ray.get(actor.ping.remote(), timeout=max(1.0, deadline - time.monotonic()))
            return
        except ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        except GetTimeoutError:
            raise _stalled(timeout_s) from None
