"""What a served model must pass before its numbers are used, against the loopback server told to answer the ways
real servers differ (llama-cpp-python takes only text, echoes one position late and takes max_tokens 0 as "no
limit"), and how the client speaks about and copes with a server that refuses, queues or drops connections.
The same behaviours recorded from a real llama-cpp-python server are replayed in test_served_real.py. No Ray."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from scoring.api.client import AdaptiveLimit, ApiConfig, ApiFatal, ApiRefused, CompletionsClient
from scoring.api.loopback import LoopbackServer
from scoring.api.probe import probe
from scoring.api.scorer import ApiScorer
from scoring.api.selfcheck import SelfCheckFailed


def scores(tiny, server, context=32, **cfg):
    probed, report = probe(ApiConfig(base=server.url, model="tiny", **cfg), tiny["tok"])
    scorer = ApiScorer(probed, tiny["tok"], context=context, stride=16)
    try:
        return scorer.score(tiny["ids"]), report
    finally:
        scorer.close()


@pytest.mark.parametrize("mode", ["echo", "logit-bias"])
def test_a_server_that_takes_only_text_is_sent_text_and_scores_as_local(tiny, mode):
    with LoopbackServer(tiny["path"], name="tiny", prompts=("text",)) as server:
        got, report = scores(tiny, server, mode=mode)
        sent = server.bodies
    assert report["prompt"]["format"] == "text" and report["prompt"]["server_prefix_tokens"] == 0
    assert "HTTP 500" in report["prompt"]["token_ids_refused"] and "valid string" in report["prompt"][
        "token_ids_refused"]
    assert all(isinstance(b["prompt"], str) for b in sent[-20:])
    assert report["self_check"]["passed"] and report["self_check"]["max_abs_difference"] < 1e-4
    exact = 0
    for g, w in zip(got, tiny["local"]):
        if g["error"] is not None:  # a window whose text re-tokenizes otherwise is refused, never misread
            assert "a text prompt cannot carry these" in g["error"] and "re-tokenizes differently" in g["error"]
            continue
        np.testing.assert_allclose(g["lp"], w["lp"], atol=1e-4, rtol=0)
        exact += 1
    assert exact >= 2


def test_a_shifted_echo_is_refused_before_scoring_and_names_the_mode_that_passed(tiny):
    with LoopbackServer(tiny["path"], name="tiny", echo_shift=True) as server:
        with pytest.raises(SelfCheckFailed) as err:
            probe(ApiConfig(base=server.url, model="tiny"), tiny["tok"])
        # nothing beyond the probe was sent: the probe window, its prefixes and the other mode's check
        assert server.requests < 60
    msg = str(err.value)
    assert msg.startswith("--api-logprobs echo is refused by the self-check: at probe position ")
    assert "where a max_tokens=1 request on the" in msg and "> tolerance 0.02" in msg
    assert "shifted by one" in msg and msg.endswith("--api-logprobs logit-bias passed the same check on this "
                                                    "server: use it")
    assert "\n" not in msg


def test_max_tokens_0_is_trusted_only_when_nothing_is_generated(tiny):
    with LoopbackServer(tiny["path"], name="tiny", zero_is_unlimited=True) as server:
        got, report = scores(tiny, server)
        zero = [b for b in server.bodies if b.get("max_tokens") == 0]
    assert report["max_tokens"] == 1 and report["max_tokens_0_generated"] >= 1
    assert len(zero) == 1 and zero[0]["stop"]  # asked once, with stop strings so that "no limit" ends at once
    with LoopbackServer(tiny["path"], name="tiny") as server:
        _, report = scores(tiny, server)
    assert report["max_tokens"] == 0 and report["max_tokens_0_generated"] == 0


def test_tokens_a_server_puts_before_a_text_are_counted_and_skipped(tiny):
    bos = tiny["tok"].convert_tokens_to_ids(tiny["tok"].eos_token) or 0
    with LoopbackServer(tiny["path"], name="tiny", prompts=("text",), text_prefix=[bos]) as server:
        got, report = scores(tiny, server, mode="echo")
    assert report["prompt"]["server_prefix_tokens"] == 1 and report["self_check"]["passed"]
    scored = [g for g in got if g["error"] is None]
    assert scored and all(len(g["lp"]) == len(w["lp"]) for g, w in zip(got, tiny["local"]) if g["error"] is None)


def test_a_text_that_re_tokenizes_differently_fails_its_row_with_the_position(tiny):
    tok = tiny["tok"]
    word = tok("Congress", add_special_tokens=False)["input_ids"]
    spelled = [i for ch in "Congress" for i in tok(ch, add_special_tokens=False)["input_ids"]]
    assert spelled != word  # the same text as other ids: the server would read the word's own tokens
    row = tiny["ids"][2] + spelled
    with LoopbackServer(tiny["path"], name="tiny", prompts=("text",)) as server:
        probed, _ = probe(ApiConfig(base=server.url, model="tiny"), tok)
        scorer = ApiScorer(probed, tok, context=32)
        got = scorer.score([row, tiny["ids"][2]])
        scorer.close()
    assert got[0]["error"].startswith("api_error: HTTP 200: a text prompt cannot carry these")
    again = tok(tok.decode(row), add_special_tokens=False)["input_ids"]
    first = next(j for j, (a, b) in enumerate(zip(again, row)) if a != b)
    assert first >= len(tiny["ids"][2]) and f"from token {first} on" in got[0]["error"]
    assert got[1]["error"] is None


def test_http_errors_are_quoted_and_told_apart_from_no_answer(tiny):
    with LoopbackServer(tiny["path"], name="tiny", fail_first=[500, 500, 500]) as server:
        client = CompletionsClient(ApiConfig(base=server.url, model="tiny", max_retries=2), sleep=lambda s: None)
        with pytest.raises(ApiRefused) as err:
            client.complete({"prompt": [1, 2], "max_tokens": 1})
    assert str(err.value).startswith("the server refused the request: HTTP 500: injected 500 (")
    assert "3 tries" in str(err.value) and "did not answer" not in str(err.value)


def test_a_connection_the_server_closed_while_idle_is_reopened_without_a_try(tiny):
    with LoopbackServer(tiny["path"], name="tiny", drop_idle=True) as server:
        client = CompletionsClient(ApiConfig(base=server.url, model="tiny", max_retries=0), sleep=lambda s: None)
        for _ in range(4):
            assert client.complete({"prompt": [1, 2, 3], "max_tokens": 1})["choices"]
    assert client.stats["retries"] == 0 and client.stats["reconnects"] >= 1 and client.stats["calls"] == 4


def test_the_timeout_is_the_users_and_a_timeout_halves_the_concurrency(tiny):
    with LoopbackServer(tiny["path"], name="tiny", delay_s=1.0) as server:
        client = CompletionsClient(ApiConfig(base=server.url, model="tiny", timeout_s=0.2, max_retries=1,
                                             concurrency=8), sleep=lambda s: None)
        with pytest.raises(ApiFatal, match=r"did not answer after 2 tries \(last: timed out: no answer within "
                                           r"--api-timeout 0.2 s\)"):
            client.complete({"prompt": [1, 2], "max_tokens": 1})
    assert client.stats["timeouts"] == 2 and client.limit.limit <= 2 and client.limit.cuts == 2


def test_the_adaptive_limit_by_hand(monkeypatch):
    limit = AdaptiveLimit(8)
    g = limit.acquire()
    limit.release(g, "overload")
    assert limit.limit == 4 and limit.cuts == 1
    stale = g  # a second signal from a request sent before that cut is not counted again
    limit.acquire()
    limit.release(stale, "overload")
    assert limit.limit == 4
    g = limit.acquire()
    limit.release(g, "ok", seconds=0.5, size=100)  # the fastest so far
    g = limit.acquire()
    limit.release(g, "ok", seconds=3.0, size=100)  # 6x slower and over 2 s: it queued
    assert limit.limit == 3 and limit.lowest == 3
    for _ in range(30):  # quick answers grow it back by about one per `limit` answers, up to the ceiling
        g = limit.acquire()
        limit.release(g, "ok", seconds=0.5, size=100)
    assert limit.limit == 8


def test_concurrency_backs_off_against_a_one_slot_server(tiny, monkeypatch):
    monkeypatch.setattr(AdaptiveLimit, "QUEUE_FLOOR_S", 0.5)
    body = {"prompt": [1, 2], "max_tokens": 1}
    with LoopbackServer(tiny["path"], name="tiny", delay_s=0.3) as server:
        client = CompletionsClient(ApiConfig(base=server.url, model="tiny", concurrency=8), sleep=lambda s: None)
        client.complete(body)  # alone: how fast the server answers when nothing waits
        threads = [threading.Thread(target=client.complete, args=(body,)) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    # eight sent at once to a server that answers one at a time: the later ones waited 4-8x as long
    assert client.stats["calls"] == 17 and client.limit.lowest < 8
    report = client.concurrency_report()
    assert report["concurrency_ceiling"] == 8 and report["concurrency_cuts"] >= 1


def test_the_one_line_reason_is_found_in_rays_text_for_every_kind_of_fatal_error():
    from scoring.api.client import fatal_in_text

    text = ("ray.exceptions.RayTaskError(ApiRefused): ray::MapBatches(score)\n  File ...\n"
            "scoring.api.client.ApiRefused: the server refused the request: HTTP 500: boom (http://h/v1, 7 tries)\n")
    assert fatal_in_text(text) == "the server refused the request: HTTP 500: boom (http://h/v1, 7 tries)"
    assert fatal_in_text("x\nSelfCheckFailed: --api-logprobs echo is refused\n") == "--api-logprobs echo is refused"
    assert fatal_in_text("ApiFatal: http://h did not answer\n") == "http://h did not answer"
    assert fatal_in_text("ValueError: something else") is None
