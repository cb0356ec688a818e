"""The request runner against the loopback server: answers journalled as they come and reused instead of resent,
identical requests sent once, a refused request a failed row, the budget guard before the request that would
pass it. No Ray."""
from __future__ import annotations

import pytest

from scoring.api.client import ApiConfig, ApiFatal, CompletionsClient
from scoring.api.loopback import LoopbackServer
from scoring.generation.kinds import Settings, first_phase, kind_key
from scoring.generation.runner import BudgetExceeded, RequestRunner

CONT = kind_key("continuation", prefix=0.5)


def runner(url: str, retries: int = 0) -> RequestRunner:
    c = CompletionsClient(ApiConfig(base=url, model="loopback", mode="none", max_retries=retries, backoff_s=0.01))
    return RequestRunner(c, chat=False, model="loopback", concurrency=4)


def requests_for(passages, samples=3):
    out = []
    for i, p in enumerate(passages):
        out += first_phase(f"r{i}", p["text"], [CONT], Settings(samples=samples, n_ok=False, max_new_tokens=6))[0]
    return out


def test_answers_are_journalled_and_reused(generation_lm):
    reqs = requests_for(generation_lm["members"][:3])
    journal = {}
    with LoopbackServer(generation_lm["model"]) as srv:
        r = runner(srv.url)
        first = r.run(reqs, {}, journal.__setitem__)
        assert srv.requests == 9 and len(journal) == 9 and len(first) == 9
        assert r.stats["requests_sent"] == 9 and r.stats["completion_tokens"] == sum(
            g["completion_tokens"] for g in first)
        again = r.run(reqs, journal, journal.__setitem__)
        assert srv.requests == 9  # nothing was sent again
        assert again == first and r.stats["requests_reused"] == 9


def test_identical_requests_go_once_and_their_usage_counts_once(generation_lm):
    text = generation_lm["members"][0]["text"]
    a = first_phase("a", text, [CONT], Settings(samples=1, seed_ok=False, max_new_tokens=5))[0]
    b = first_phase("b", text, [CONT], Settings(samples=1, seed_ok=False, max_new_tokens=5))[0]
    assert a[0].key(False, "loopback") == b[0].key(False, "loopback")  # no seed: the same request
    with LoopbackServer(generation_lm["model"]) as srv:
        rows = runner(srv.url).run(a + b)
        assert srv.requests == 1
    assert [g["id"] for g in rows] == ["a", "b"] and rows[0]["text"] == rows[1]["text"]
    assert rows[0]["completion_tokens"] > 0 and rows[1]["completion_tokens"] == 0


def test_a_refused_request_is_a_failed_row_and_a_dead_server_stops_the_batch(generation_lm):
    reqs = requests_for(generation_lm["members"][:2], samples=1)
    too_long = [r.__class__(**{**r.__dict__, "max_tokens": 10_000}) for r in reqs[:1]]
    with LoopbackServer(generation_lm["model"]) as srv:
        rows = runner(srv.url).run(too_long + reqs[1:])
    assert rows[0]["sample"] == -1 and rows[0]["error"].startswith("api_error: HTTP 400")
    assert rows[1]["sample"] == 0 and rows[1]["error"] is None
    with LoopbackServer(generation_lm["model"], die_after=1) as srv:
        with pytest.raises(ApiFatal):
            runner(srv.url).run(requests_for(generation_lm["members"][:3], samples=2))


def test_the_budget_guard_stops_before_sending(generation_lm):
    reqs = requests_for(generation_lm["members"][:2])
    with LoopbackServer(generation_lm["model"]) as srv:
        with pytest.raises(BudgetExceeded, match="6 requests left to send where the budget allows 5"):
            runner(srv.url).run(reqs, max_new=5)
        assert srv.requests == 0


def test_rate_limits_and_server_errors_are_retried(generation_lm):
    reqs = requests_for(generation_lm["members"][:1], samples=1)
    with LoopbackServer(generation_lm["model"], fail_first=[429, 500]) as srv:
        r = runner(srv.url, retries=3)
        rows = r.run(reqs)
        assert srv.statuses == {429: 1, 500: 1, 200: 1}
    assert rows[0]["sample"] == 0 and r.client.stats["retries"] == 2
