"""What the driver watches while a scoring pool runs on a cluster that can lose nodes.

- `watch(parts, ...)`: yields what the pool yields, and raises `StalledPool` when nothing arrives for
  `stall_timeout_s`. Ray Data can wait forever for resources that left with a node ("Cluster resources are not
  enough to run any task ... The job may hang forever"); a job must fail in bounded time instead, saying what the
  pool needs and what the cluster still offers, with its committed parts kept for a rerun.
- `alive_nodes()` / `NodeWatch`: which nodes were alive when the pool started, so that after a failure the driver
  can tell a lost node (reschedule the parts left on what is alive) from a row that kills its worker (isolate it).
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from jobs.plane.retry_policy import MAX_REPLANS, SETTLE_S  # why these values: jobs/plane/retry_policy.py

# Errors through which a lost node reaches the driver (the actor's RPCs fail, its objects or owner are gone).
NODE_LOSS_ERRORS = ("ActorUnavailableError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
                    "ObjectReconstructionFailedError", "ObjectFetchTimedOutError")
NODE_LOSS_PHRASES = ("node has died", "node died", "marked dead", "raylet died", "raylet is terminated")


class StalledPool(RuntimeError):
    """The pool made no progress for the stall timeout: the job stops, its committed parts stay for a rerun."""


def alive_nodes() -> dict[str, dict]:
    """Node id -> resources of every node the GCS counts as alive."""
    import ray

    return {n["NodeID"]: dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")}


def capacity_line(needs: dict) -> str:
    """'the alive nodes offer ...; one scorer actor needs ...', for messages."""
    nodes = alive_nodes()
    offer = {k: sum(r.get(k, 0.0) for r in nodes.values()) for k in ("CPU", "GPU")}
    want = ", ".join(f"{v:g} {k}" for k, v in needs.items() if v)
    return (f"{len(nodes)} alive node(s) offer {offer['CPU']:g} CPU, {offer['GPU']:g} GPU in all; one scorer actor "
            f"needs {want} on one node")


def is_node_loss(exc: BaseException) -> bool:
    """Whether a failed pipeline's error looks like a lost node or actor rather than a row crashing a worker."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        name, text = type(exc).__name__, str(exc).lower()
        if name in NODE_LOSS_ERRORS or any(p in text for p in NODE_LOSS_PHRASES):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@dataclass
class NodeWatch:
    """The alive nodes at a pipeline's start; after a failure, which of them left."""

    started_with: frozenset

    @classmethod
    def start(cls) -> "NodeWatch":
        return cls(frozenset(alive_nodes()))

    def lost(self, settle_s: float | None = None, poll_s: float = 1.0) -> set[str]:
        """Nodes alive at the start that are not any more, waiting up to `settle_s` (SETTLE_S) for the GCS to
        notice a node that was killed (its heartbeats stop first; it is marked dead later)."""
        deadline = time.monotonic() + (SETTLE_S if settle_s is None else settle_s)
        while True:
            gone = set(self.started_with - set(alive_nodes()))
            if gone or time.monotonic() >= deadline:
                return gone
            time.sleep(poll_s)


def replanning(run: Callable[[list], Iterable[dict]], work: Sequence, done: Callable[[object], bool], stats: dict,
               echo: Callable[[str], None]) -> Iterator[dict]:
    """Yield what `run(work)` yields; when it fails because a node was lost, run again on the items not `done`
    yet (a new pool, sized to the nodes still alive), at most MAX_REPLANS times. Any other error, and a node loss
    past that, propagates. Counts `replans` and `nodes_lost` in `stats`."""
    work = list(work)
    while work:
        nodes = NodeWatch.start()
        try:
            yield from run(work)
            return
        except StalledPool:
            raise
        except Exception as exc:  # noqa: BLE001 - classified below; everything else is re-raised as it was
            if not is_node_loss(exc) or stats.get("replans", 0) >= MAX_REPLANS:
                raise
            left = [w for w in work if not done(w)]
            lost = nodes.lost()
            stats["replans"] = stats.get("replans", 0) + 1
            stats["nodes_lost"] = stats.get("nodes_lost", 0) + len(lost)
            echo(f"{len(lost) or 'no'} node(s) left the cluster ({type(exc).__name__}); {len(work) - len(left)} "
                 f"part(s) were saved, rescheduling the {len(left)} left on the {len(alive_nodes())} alive node(s)")
            work = left


_END = object()


def watch(items: Iterable, stall_timeout_s: float, describe: Callable[[], str] = lambda: "",
          clock: Callable[[], float] = time.monotonic) -> Iterator:
    """Yield from `items` (run on a daemon thread) and raise StalledPool when none arrives for `stall_timeout_s`.
    The thread is left behind on a stall: the driver is about to fail, and Ray ends the pool with the driver."""
    q: queue.Queue = queue.Queue(maxsize=64)

    def pump():
        try:
            for item in items:
                q.put((item, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            q.put((None, exc))
            return
        q.put((_END, None))

    threading.Thread(target=pump, name="pool-watch", daemon=True).start()
    last = clock()
    while True:
        try:
            item, exc = q.get(timeout=max(0.05, min(5.0, stall_timeout_s - (clock() - last))))
        except queue.Empty:
            if clock() - last >= stall_timeout_s:
                detail = describe()
                raise StalledPool(f"no part finished in {stall_timeout_s:g} s" + (f": {detail}" if detail else "")
                                  ) from None
            continue
        if exc is not None:
            raise exc
        if item is _END:
            return
        last = clock()
        yield item
