"""jobs/plane/watch.py without Ray: the stall watchdog on a fake clock and a blocking source, the node-loss
classification of real Ray exception types, and the node watch over a stubbed `ray.nodes()`."""
from __future__ import annotations

import threading

import pytest

from jobs.plane import watch as pool_watch
from jobs.plane.watch import NodeWatch, StalledPool, is_node_loss, watch


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0  # every look at the clock is a second later: the watchdog must not spin forever
        return self.now


def test_watch_passes_every_item_through_in_order():
    assert list(watch(iter(range(50)), stall_timeout_s=60)) == list(range(50))


def test_watch_raises_stalled_when_nothing_arrives_and_says_why():
    release = threading.Event()

    def stuck():
        yield "first"
        release.wait(30)  # a pool waiting for resources that left with a node
        yield "never seen"

    got = []
    with pytest.raises(StalledPool, match=r"no part finished in 5 s: 1 alive node\(s\) offer"):
        for item in watch(stuck(), stall_timeout_s=5, describe=lambda: "1 alive node(s) offer 1 CPU",
                          clock=FakeClock()):
            got.append(item)
    release.set()
    assert got == ["first"]


def test_watch_hands_on_the_sources_own_error():
    def broken():
        yield 1
        raise ValueError("a part failed")

    with pytest.raises(ValueError, match="a part failed"):
        list(watch(broken(), stall_timeout_s=60))


def test_node_loss_is_told_from_a_row_crashing_its_worker():
    from ray.exceptions import ActorDiedError, ActorUnavailableError, NodeDiedError

    assert is_node_loss(ActorUnavailableError("The actor is temporarily unavailable: RpcError", b"x" * 16))
    assert is_node_loss(NodeDiedError("node 1 died"))
    assert is_node_loss(RuntimeError("Task failed: the actor died because its node has died"))
    wrapped = RuntimeError("pipeline failed")
    wrapped.__cause__ = ActorUnavailableError("gone", b"x" * 16)
    assert is_node_loss(wrapped)
    assert not is_node_loss(ActorDiedError())  # a worker that exited (e.g. os._exit on a poison row)
    assert not is_node_loss(ValueError("bad row"))


def test_node_watch_reports_the_nodes_that_left(monkeypatch):
    alive = {"a": {"CPU": 1.0}, "b": {"CPU": 1.0}}
    monkeypatch.setattr(pool_watch, "alive_nodes", lambda: dict(alive))
    w = NodeWatch.start()
    assert w.lost(settle_s=0) == set()
    del alive["b"]
    assert w.lost(settle_s=0) == {"b"}


def test_capacity_line_sums_alive_nodes(monkeypatch):
    monkeypatch.setattr(pool_watch, "alive_nodes", lambda: {"a": {"CPU": 1.0}, "b": {"CPU": 2.0, "GPU": 1.0}})
    line = pool_watch.capacity_line({"CPU": 0.75, "GPU": 0.0})
    assert line == "2 alive node(s) offer 3 CPU, 1 GPU in all; one scorer actor needs 0.75 CPU on one node"


def test_replanning_reruns_only_what_is_left_after_a_lost_node_and_gives_up_on_other_errors(monkeypatch):
    from ray.exceptions import ActorUnavailableError

    alive = {"head": {"CPU": 1.0}, "worker": {"CPU": 1.0}}
    monkeypatch.setattr(pool_watch, "alive_nodes", lambda: dict(alive))
    done, calls, said = set(), [], []

    def run(items):
        calls.append(list(items))
        for i in items:
            if len(calls) == 1 and i == 2:  # the worker node goes while part 2 is on it
                del alive["worker"]
                raise ActorUnavailableError("The actor is temporarily unavailable: RpcError", b"x" * 16)
            yield i

    stats = {}
    for item in pool_watch.replanning(run, [0, 1, 2, 3], lambda i: i in done, stats, said.append):
        done.add(item)
    assert calls == [[0, 1, 2, 3], [2, 3]] and done == {0, 1, 2, 3}
    assert stats == {"replans": 1, "nodes_lost": 1}
    assert said == ["1 node(s) left the cluster (ActorUnavailableError); 2 part(s) were saved, rescheduling the 2 "
                    "left on the 1 alive node(s)"]

    def poison(items):
        yield from ()
        raise ValueError("a row crashed its worker")

    with pytest.raises(ValueError):
        list(pool_watch.replanning(poison, [0], lambda i: False, {}, said.append))


def test_replanning_stops_after_max_replans(monkeypatch):
    from ray.exceptions import ActorUnavailableError

    monkeypatch.setattr(pool_watch, "alive_nodes", lambda: {"head": {}})
    monkeypatch.setattr(pool_watch, "SETTLE_S", 0.0)

    def always_lost(items):
        yield from ()
        raise ActorUnavailableError("unavailable", b"x" * 16)

    stats = {}
    with pytest.raises(ActorUnavailableError):
        list(pool_watch.replanning(always_lost, [0], lambda i: False, stats, lambda m: None))
    assert stats["replans"] == pool_watch.MAX_REPLANS
