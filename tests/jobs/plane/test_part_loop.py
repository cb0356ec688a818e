"""The one part loop (jobs/plane/part_loop.run_parts) without Ray: reuse of committed parts, `start` run only when
a part is left (and before the pool), the abort hook, and a failed pipeline either isolated or re-raised with the
reason its parts are not isolated. The pool and the node watch are stand-ins; the store is the real PartStore."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from curation.io.outputs import Location
from jobs.plane.part_loop import ABORT_ENV, InjectedAbort, run_parts
from jobs.plane.part_store import PartStore
from jobs.plane.runners import LOCAL


@dataclass
class Part:
    index: int


@pytest.fixture
def loop(tmp_path):
    events = []

    def go(n=4, pool=None, resume=True, **kw):
        parts = [Part(i) for i in range(n)]
        store = PartStore(Location(str(tmp_path)), "fp", ("data",))

        def default_pool(items):
            events.append(("pool", [p.index for p in items]))
            for p in items:
                yield {"index": p.index, "rows": 1}

        return run_parts(parts, index=lambda p: p.index, digests={p.index: f"d{p.index}" for p in parts},
                         store=store, pool=pool or default_pool, runner=LOCAL, stats={}, run_id="r", resume=resume,
                         start=lambda: events.append(("start",)), **kw)

    return go, events


def test_start_runs_once_before_the_pool_and_not_when_every_part_is_reused(loop):
    go, events = loop
    assert sorted(go()) == [0, 1, 2, 3]
    assert events == [("start",), ("pool", [0, 1, 2, 3])]
    events.clear()
    assert sorted(go()) == [0, 1, 2, 3] and events == []  # all committed: no cluster needed


def test_a_cut_off_run_resumes_with_the_parts_left(loop, monkeypatch):
    go, events = loop
    monkeypatch.setenv(ABORT_ENV, "2")
    with pytest.raises(InjectedAbort):
        go()
    monkeypatch.delenv(ABORT_ENV)
    events.clear()
    go()
    assert events == [("start",), ("pool", [2, 3])]


def test_a_failed_pipeline_is_isolated_or_stops_saying_why_not(loop):
    go, _ = loop

    def failing(items):
        yield {"index": items[0].index, "rows": 1}
        raise ValueError("an actor died")

    isolated = []

    def isolate(left, commit):
        isolated.extend(p.index for p in left)
        for p in left:
            commit({"index": p.index, "rows": 1})

    assert sorted(go(pool=failing, isolate=isolate, resume=False)) == [0, 1, 2, 3] and isolated == [1, 2, 3]
    with pytest.raises(RuntimeError, match="not row-isolated: each row is quarantined by its part"):
        go(pool=failing, resume=False, not_isolated="each row is quarantined by its part")
